"""Framing: one ingest unit (a file or a request body) into numbered lines.

Bodies may be NDJSON, a JSON array, a single JSON object (also pretty-printed), or the SSE
text the AG-UI encoder writes; gzip is undone first, here only (`inflated`). Lines stay bytes
where they can, so the interpreter can skip irrelevant events without parsing them.
"""

from __future__ import annotations

import sys
import zlib
from collections.abc import Iterator
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
        return Framed(lines=body.split(b"\n"))
    return Framed(items=list(_frames(body, media_type)))


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
        # The tap's framing: one SSE parser for both (its package loads the whole tap).
        from sidewatch.tap.sse import sse_items  # noqa: PLC0415

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
        yield from enumerate(body.split(b"\n"), start=1)


STREAM_CHUNK = 1 << 20  # bytes of a file read at a time


def ndjson_file(path: str) -> Iterator[list[bytes]] | None:
    """A plain NDJSON file's lines, a chunk of whole lines at a time (together exactly
    `frame(read_file(path)).lines`), so that a file is never held whole in memory. None when
    `frame` would not read the file as plain NDJSON from its first line alone (gzip, SSE, a
    JSON array, a spread object), or the file starts with no line to ingest, and for standard
    input: those are read whole, as before."""
    if path == "-":
        return None
    try:
        fh = open(path, "rb")  # noqa: SIM115 (closed by the generator, or here)
    except OSError as e:
        raise InputError(f"{path}: {e.strerror or e}") from e
    first = b""
    try:  # up to the end of the first line, which says how to read the file
        while b"\n" not in first and (chunk := fh.read(STREAM_CHUNK)):
            first += chunk
    except OSError as e:
        fh.close()
        raise InputError(f"{path}: {e.strerror or e}") from e
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
        fh.close()
        return None
    return _chunks(fh, first, path)


def _chunks(fh: BinaryIO, chunk: bytes, path: str) -> Iterator[list[bytes]]:
    with fh:
        pending: list[bytes] = []  # the line the last chunk ended inside of
        while chunk:
            nl = chunk.rfind(b"\n")
            if nl < 0:
                pending.append(chunk)
            else:
                pending.append(chunk[:nl])
                yield b"".join(pending).split(b"\n")
                pending = [chunk[nl + 1 :]]
            try:
                chunk = fh.read(STREAM_CHUNK)
            except OSError as e:
                raise InputError(f"{path}: {e.strerror or e}") from e
        yield [b"".join(pending)]


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
