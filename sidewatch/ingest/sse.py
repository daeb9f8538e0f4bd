"""Framing of streamed AG-UI bodies: SSE events and NDJSON lines, fed in chunks or whole.

One parser, two byte-identical copies: `sidewatch_tap.sse` (the tap's distribution) and
`sidewatch.ingest.sse` (the daemon's), so that what the tap mirrors is what ingest reads and
neither distribution imports the other (tests/ingest/test_sse_copies.py holds them equal; edit
one, copy it over the other: docs/internals/distributions.md). Standard library only. Lines
end in LF, CRLF or a lone CR (the SSE specification's three, and sse-starlette writes CRLF); a
CRLF cut between two chunks is one line end. The work is linear in the bytes fed: a chunk is scanned
once, a partial line is held as a list of pieces and joined once when its end arrives, and
`limit` bounds the bytes held. An event (or NDJSON line) past `limit` is dropped whole and
counted in `oversized`; the stream goes on at the next one.
"""

from __future__ import annotations

from collections.abc import Iterator

Item = tuple[int, bytes]  # (1-based line number of the item's first line, its data)


class Framer:
    """Cut a stream into SSE events (`sse=True`: the joined `data:` lines of each event) or
    NDJSON lines (each non-blank line), chunk by chunk."""

    def __init__(self, sse: bool = True, limit: int | None = None) -> None:
        self.sse = sse
        self.limit = limit
        self.oversized = 0  # events or lines dropped for being longer than `limit`
        self.copied = 0  # bytes copied joining a line's pieces: the work beyond one scan
        self._pieces: list[bytes] = []  # the current partial line
        self._held = 0  # bytes in `_pieces` and `_data`
        self._skipping = False  # inside an oversized event or line: drop until it ends
        self._cr = False  # the last chunk ended in CR: a leading LF is that line's end
        self._line = 0
        self._data: list[bytes] = []
        self._first = 0

    @property
    def held(self) -> int:
        """Bytes buffered now (a partial line and the data of an unfinished event)."""
        return self._held

    def feed(self, chunk: bytes) -> list[Item]:
        """The items `chunk` completes."""
        if self._cr and chunk[:1] == b"\n":
            chunk = chunk[1:]
        self._cr = False
        if not chunk:
            return []
        last = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
        if last < 0:
            self._hold(chunk)
            return []
        head, rest = chunk[: last + 1], chunk[last + 1 :]
        self._cr = head[-1:] == b"\r"
        if self._pieces:
            head = b"".join((*self._pieces, head))
            self.copied += len(head)
            self._held -= sum(map(len, self._pieces))
            self._pieces = []
        out = self._lines(head.splitlines())
        if rest:
            self._hold(rest)
        return out

    def close(self) -> list[Item]:
        """The last item of a stream that ends without its line end or blank line."""
        out: list[Item] = []
        if self._pieces:
            tail = b"".join(self._pieces)
            self._held -= len(tail)
            self._pieces = []
            out = self._lines([tail])
        if self.sse:
            out += self._lines([b""])
        self._skipping = False
        return out

    def _hold(self, piece: bytes) -> None:
        if self._skipping:
            return
        self._pieces.append(piece)
        self._held += len(piece)
        if self.limit is not None and self._held > self.limit:
            self._drop()

    def _drop(self) -> None:
        self.oversized += 1
        self._skipping = True
        self._pieces, self._data, self._held = [], [], 0

    def _lines(self, lines: list[bytes]) -> list[Item]:
        out: list[Item] = []
        n = self._line
        if not self.sse:
            for line in lines:
                n += 1
                if self._skipping:  # the end of the oversized line
                    self._skipping = False
                elif self.limit is not None and len(line) > self.limit:
                    self.oversized += 1
                elif line.strip():
                    out.append((n, line))
            self._line = n
            return out
        data, limit, skipping = self._data, self.limit, self._skipping
        for line in lines:
            n += 1
            if line[:5] == b"data:":
                value = line[6:] if line[5:6] == b" " else line[5:]
            elif not line:
                if data:
                    out.append((self._first, b"\n".join(data)))
                    data.clear()
                    self._held = 0
                skipping = False
                continue
            elif line == b"data":
                value = b""  # a bare `data` field: an empty data line
            else:
                continue  # event:, id:, retry: and comments carry nothing sidewatch needs
            if skipping:
                continue
            if not data:
                self._first = n
            data.append(value)
            if limit is not None:
                self._held += len(value)
                if self._held > limit:
                    self._drop()
                    data, skipping = self._data, True
        self._skipping = skipping
        self._line = n
        return out


def sse_items(body: bytes) -> Iterator[Item]:
    """The events of a whole SSE body."""
    framer = Framer(sse=True)
    yield from framer.feed(body)
    yield from framer.close()
