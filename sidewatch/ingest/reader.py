"""Framing: one ingest unit (a file or a request body) into numbered lines.

Bodies may be NDJSON, a JSON array, a single JSON object (also pretty-printed), or the SSE
text the AG-UI encoder writes; gzip is undone first, here only (`inflated`). Lines stay bytes
where they can, so the interpreter can skip irrelevant events without parsing them.
"""

from __future__ import annotations

import io
import sys
import zlib
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import orjson

from sidewatch.errors import InputError, TooLarge

Line = tuple[int, bytes | Any]  # (line number, raw bytes or an already-parsed value)

_SSE_FIELDS = (b"data:", b"event:", b"id:", b"retry:", b":")
NDJSON_TYPES = ("application/x-ndjson", "application/jsonl", "application/ndjson")
GZIP = b"\x1f\x8b"  # how a gzip member starts


def inflated(body: bytes, encoding: str = "identity", limit: int | None = None) -> bytes:
    """The body with gzip undone: the one place it is, for HTTP bodies, JetStream messages and
    files alike. Gzip is undone when `encoding` says so or the body starts as gzip, and once
    more when what came out is gzip again (a `.gz` file sent with `Content-Encoding: gzip`),
    each time within `limit` bytes (TooLarge past it)."""
    for _ in range(2):
        if encoding != "gzip" and body[:2] != GZIP:
            break
        body, encoding = gunzip(body, limit), "identity"
    return body


def gunzip(body: bytes, limit: int | None = None) -> bytes:
    """Undo gzip, every member of it (concatenated .gz files are one stream, as gzip -d
    reads them), refusing to inflate past `limit` bytes in all (a gzip bomb is an input
    error). Called by `inflated`."""
    chunks: list[bytes] = []
    size, rest = 0, body
    while True:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            # One byte past the room left tells "over the limit" from "exactly at it".
            chunk = d.decompress(rest, limit - size + 1) if limit else d.decompress(rest)
        except zlib.error as e:
            raise InputError(f"body is not valid gzip: {e}") from e
        size += len(chunk)
        if limit and size > limit:
            raise TooLarge(f"body inflates past the limit of {limit} bytes")
        if not d.eof:
            raise InputError("body is not valid gzip: the stream is cut short")
        chunks.append(chunk)
        rest = d.unused_data
        if not rest.strip(b"\0"):  # gzip's own reader allows zero padding at the end
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)
        if rest[:2] != GZIP:
            raise InputError("body is not valid gzip: bytes after its last member")


@dataclass(frozen=True, slots=True)
class Framed:
    """A framed unit: NDJSON as its raw lines (line i+1 is `lines[i]`), anything else as
    numbered values."""

    lines: list[bytes] = field(default_factory=list)
    items: list[Line] = field(default_factory=list)


def frame(
    body: bytes,
    media_type: str | None = None,
    encoding: str = "identity",
    max_inflated: int | None = None,
) -> Framed:
    """The unit's lines, gzip undone (`inflated`): NDJSON stays a list of raw lines, so that
    the interpreter can drop the bulk of irrelevant events in one pass without a Python call
    per line."""
    body = inflated(body, encoding, max_inflated)
    if _is_ndjson(body, media_type):
        return Framed(lines=split_lines(body))
    return Framed(items=list(_frames(body, media_type)))


def split_lines(text: bytes) -> list[bytes]:
    """The lines of NDJSON text, as `wc -l` and `split -l` count them: a final newline ends
    the last line and starts none (nothing after it is no line), so a text of n lines is n
    whether it ends in a newline or not. CRLF lines keep their CR (`feed` strips it)."""
    lines = text.split(b"\n")
    if len(lines) > 1 and not lines[-1]:
        lines.pop()
    return lines


def _is_ndjson(body: bytes, media_type: str | None) -> bool:
    if media_type is not None:
        return media_type in NDJSON_TYPES
    head = body[:64].lstrip()
    if head.startswith((*_SSE_FIELDS, b"[")):
        return False
    if not head.startswith(b"{"):
        return True
    # NDJSON, unless the first line is not a whole object and the body is one spread object.
    nl = body.find(b"\n")
    if nl < 0 or _parses(body[:nl]):
        return True
    return not _parses(body)


def _parses(text: bytes) -> bool:
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True


def frames(body: bytes, media_type: str | None = None) -> Iterator[Line]:
    """The numbered lines of a unit. Line numbers are 1-based lines of the (unzipped) text; in a
    JSON array they are element numbers."""
    yield from _frames(inflated(body), media_type)


def _frames(body: bytes, media_type: str | None) -> Iterator[Line]:
    head = body.lstrip()[:8]
    if media_type == "text/event-stream" or (media_type is None and head.startswith(_SSE_FIELDS)):
        # The tap's framing, in the daemon's own copy (sidewatch.ingest.sse).
        from sidewatch.ingest.sse import sse_items  # noqa: PLC0415

        yield from sse_items(body)
    elif head.startswith(b"["):
        try:
            value = orjson.loads(body)
        except orjson.JSONDecodeError as e:
            raise InputError(f"body starts a JSON array but is not valid JSON: {e}") from e
        if not isinstance(value, list):
            raise InputError("body is not a JSON array")
        yield from enumerate(value, start=1)
    else:
        if head.startswith(b"{") and b"\n" in body.strip():
            try:
                yield 1, orjson.loads(body)  # one object spread over several lines
                return
            except orjson.JSONDecodeError:
                pass  # NDJSON after all
        yield from enumerate(split_lines(body), start=1)


STREAM_CHUNK = 1 << 20  # bytes of a file read (or inflated) at a time


class NdjsonFile:
    """A plain NDJSON file (gzip undone as it is read) as its lines, a chunk of whole lines
    at a time: together exactly `frame(read_file(path)).lines`, in the memory of a chunk.
    `position`: how many bytes of the file (of the gzip, for a `.gz`) were read so far."""

    def __init__(self, fh: BinaryIO, path: str, gz: bool) -> None:
        self.path = path
        self.position = 0
        self._fh = fh
        self._blocks = _inflate(self._raw(), path) if gz else self._raw()
        self.first = b""  # up to the end of the first line, which says how to read the file
        try:
            while b"\n" not in self.first and (block := next(self._blocks, b"")):
                self.first += block
        except BaseException:
            fh.close()
            raise

    def _raw(self) -> Iterator[bytes]:
        while True:
            try:
                block = self._fh.read(STREAM_CHUNK)
            except OSError as e:
                raise InputError(f"{self.path}: {e.strerror or e}") from e
            if not block:
                return
            self.position += len(block)
            yield block

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> NdjsonFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self._fh.close()

    def __iter__(self) -> Iterator[list[bytes]]:
        with self._fh:
            pending: list[bytes] = []  # the line the last block ended inside of
            block = self.first
            while block:
                nl = block.rfind(b"\n")
                if nl < 0:
                    pending.append(block)
                else:
                    pending.append(block[:nl])
                    yield b"".join(pending).split(b"\n")
                    pending = [block[nl + 1 :]]
                block = next(self._blocks, b"")
            if rest := b"".join(pending):  # after the last newline: a last line, if any
                yield [rest]


def _inflate(raw: Iterator[bytes], path: str) -> Iterator[bytes]:
    """`gunzip` a block at a time: every member, zero padding allowed only at the end, at
    most STREAM_CHUNK bytes inflated at once (a gzip bomb never sits in memory whole)."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    padding, data = False, b""
    for block in raw:
        data += block
        more = True  # output may be pending inside `d` even with no input left
        while data or more:
            if padding or (d.eof and data[:1] == b"\0"):
                padding = True
                if data.strip(b"\0"):
                    raise InputError(f"{path}: not valid gzip: bytes after its last member")
                data = b""
                break
            if d.eof:  # the next member, once its first two bytes are here
                if len(data) < 2:
                    break
                if data[:2] != GZIP:
                    raise InputError(f"{path}: not valid gzip: bytes after its last member")
                d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            try:
                out = d.decompress(data, STREAM_CHUNK)
            except zlib.error as e:
                raise InputError(f"{path}: not valid gzip: {e}") from e
            data = d.unused_data if d.eof else d.unconsumed_tail
            more = not d.eof and len(out) == STREAM_CHUNK
            if out:
                yield out
    if not d.eof or (data and not padding):
        raise InputError(f"{path}: not valid gzip: the stream is cut short")


def ndjson_file(path: str) -> NdjsonFile | None:
    """A plain NDJSON file (gzip allowed) to be read a chunk of lines at a time, so that a
    file is never held whole in memory. None when `frame` would not read the file as plain
    NDJSON from its first line alone (SSE, a JSON array, a spread object, gzip in gzip), or
    the file starts with no line to ingest, and for standard input: those are read whole."""
    if path == "-":
        return None
    try:
        fh = open(path, "rb")  # noqa: SIM115 (closed by the NdjsonFile, or here)
        gz = fh.peek(2)[:2] == GZIP if isinstance(fh, io.BufferedReader) else False
    except OSError as e:
        raise InputError(f"{path}: {e.strerror or e}") from e
    stream = NdjsonFile(fh, path, gz)
    first = stream.first
    nl = first.find(b"\n")
    head = first[:64].lstrip()
    plain = (
        first[:2] != GZIP
        and nl >= 0
        and bool(first.strip())
        and not head.startswith((*_SSE_FIELDS, b"["))
        # `_is_ndjson`'s reading, where the first line decides it
        and (not head.startswith(b"{") or _parses(first[:nl]))
    )
    if not plain:
        stream.close()
        return None
    return stream


def read_file(path: str) -> bytes:
    """A file's bytes (`-` is standard input), as they are: gzip is undone by `frame`."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(path, "rb") as fh:
                data = fh.read()
    except OSError as e:
        raise InputError(f"{path}: {e.strerror or e}") from e
    return data


_RUN_ENDS = ("RUN_FINISHED", "RUN_ERROR")


class FileCuts:
    """A file's lines (a chunk at a time) handed out a unit at a time, cut where a unit
    reads as a sender's body of whole runs would: once a unit holds `size` lines, after the
    next line that ends a run when no tool call is open then (a call's START and its
    ARGS/END are read in one unit), and at `2 * size` lines whatever is open (a file with
    no run's end). Blank lines after a cut stay with its unit. `line`: lines handed out."""

    def __init__(self, chunks: Iterable[list[bytes]], size: int) -> None:
        self.size = size
        self.line = 0
        self._chunks = iter(chunks)
        self._lines: list[bytes] = []
        self._at = 0  # the next line of `_lines` to hand out

    def _fill(self) -> bool:
        """Whether a line is left, reading the next chunk when this one is used up."""
        while self._at >= len(self._lines):
            chunk = next(self._chunks, None)
            if chunk is None:
                return False
            self._lines, self._at = chunk, 0
        return True

    def _take(self, end: int) -> list[bytes]:
        piece = self._lines[self._at : end]
        self._at += len(piece)
        self.line += len(piece)
        return piece

    def more(self) -> bool:
        """Whether a line is left for another unit."""
        return self._fill()

    def unit(self, open_calls: Collection[object]) -> Iterator[list[bytes]]:
        """The next unit's lines, in pieces; `open_calls`: the tool calls its reader holds
        open, looked at once a piece is read."""
        first = self.line
        while self._fill():
            short = first + self.size - self.line  # lines before a cut is looked for
            if short > 0:
                yield self._take(self._at + short)
                continue
            cap = first + 2 * self.size - self.line
            if cap <= 0:
                break
            end = self._run_end(min(len(self._lines), self._at + cap))
            if end is None:
                yield self._take(self._at + cap)
                continue
            yield self._take(end + 1)
            if not open_calls:
                break
        while self._fill() and not self._lines[self._at].strip():
            yield self._take(self._at + 1)

    def _run_end(self, stop: int) -> int | None:
        """The index of the first line from `_at` up to `stop` that ends a run."""
        lines = self._lines
        for i in range(self._at, stop):
            line = lines[i]
            if b"RUN_FINISHED" in line or b"RUN_ERROR" in line:
                try:
                    obj = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(obj, dict) and obj.get("type") in _RUN_ENDS:
                    return i
        return None
