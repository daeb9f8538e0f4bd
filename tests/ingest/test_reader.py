"""Framing: every accepted body format yields the same events, each with its line number."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from sidewatch.errors import InputError, TooLarge
from sidewatch.ingest.reader import frame, frames, gunzip

STARTED = {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"}
ERROR = {"type": "RUN_ERROR", "message": "boom"}
FINISHED = {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"}

Framer = Callable[[bytes, str | None], list[tuple[int, Any]]]


def via_frames(body: bytes, media_type: str | None) -> list[tuple[int, Any]]:
    return list(frames(body, media_type))


def via_frame(body: bytes, media_type: str | None) -> list[tuple[int, Any]]:
    """The framing ingest uses: NDJSON kept as raw lines, anything else as numbered values."""
    framed = frame(body, media_type)
    return [*enumerate(framed.lines, start=1), *framed.items]


@pytest.fixture(params=[via_frames, via_frame], ids=["frames", "frame"])
def framer(request: pytest.FixtureRequest) -> Framer:
    f: Framer = request.param
    return f


def numbered(framer: Framer, body: bytes, media_type: str | None = None) -> list[tuple[int, Any]]:
    """The non-blank lines of a body as (line number, parsed value)."""
    out = []
    for n, raw in framer(body, media_type):
        if isinstance(raw, bytes) and not raw.strip():
            continue
        out.append((n, orjson.loads(raw) if isinstance(raw, bytes) else raw))
    return out


def ndjson(*events: dict[str, Any]) -> bytes:
    return b"\n".join(orjson.dumps(e) for e in events) + b"\n"


def sse(*events: dict[str, Any]) -> bytes:
    """What the AG-UI encoder writes: one `data:` block per event, blank-line separated."""
    return b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in events)


def test_ndjson_lines_are_numbered_from_one(framer: Framer) -> None:
    body = ndjson(STARTED, ERROR, FINISHED)
    expected = [(1, STARTED), (2, ERROR), (3, FINISHED)]

    assert expected == numbered(framer, body)


def test_a_body_declared_as_ndjson_is_read_line_by_line(framer: Framer) -> None:
    body = ndjson(STARTED, ERROR)
    expected = [(1, STARTED), (2, ERROR)]

    assert expected == numbered(framer, body, "application/x-ndjson")


def test_blank_lines_keep_the_numbering_of_the_text(framer: Framer) -> None:
    body = orjson.dumps(STARTED) + b"\n\n\n" + orjson.dumps(ERROR) + b"\n"
    expected = [(1, STARTED), (4, ERROR)]

    assert expected == numbered(framer, body)


def test_crlf_line_endings_are_read_like_lf(framer: Framer) -> None:
    body = orjson.dumps(STARTED) + b"\r\n" + orjson.dumps(ERROR) + b"\r\n"
    expected = [(1, STARTED), (2, ERROR)]

    assert expected == numbered(framer, body)


def test_a_line_that_is_not_json_is_still_framed_for_the_interpreter_to_reject(
    framer: Framer,
) -> None:
    body = orjson.dumps(STARTED) + b"\nnot json at all\n" + orjson.dumps(ERROR)
    expected = [(1, orjson.dumps(STARTED)), (2, b"not json at all"), (3, orjson.dumps(ERROR))]

    assert expected == [(n, raw.strip()) for n, raw in framer(body, None) if raw.strip()]


def test_a_json_array_yields_its_elements_numbered_from_one(framer: Framer) -> None:
    body = orjson.dumps([STARTED, ERROR, FINISHED])
    expected = [(1, STARTED), (2, ERROR), (3, FINISHED)]

    assert expected == numbered(framer, body)


def test_a_pretty_printed_json_array_is_one_array(framer: Framer) -> None:
    body = orjson.dumps([STARTED, ERROR], option=orjson.OPT_INDENT_2)
    expected = [(1, STARTED), (2, ERROR)]

    assert expected == numbered(framer, body)


def test_a_json_array_keeps_elements_that_are_not_objects_for_the_interpreter(
    framer: Framer,
) -> None:
    body = orjson.dumps([STARTED, 42, "text"])
    expected = [(1, STARTED), (2, 42), (3, "text")]

    assert expected == numbered(framer, body)


def test_a_body_that_starts_an_array_but_is_not_json_is_an_input_error(framer: Framer) -> None:
    with pytest.raises(InputError):
        framer(b'[{"type": "RUN_STARTED"', None)


def test_a_single_json_object_is_one_line(framer: Framer) -> None:
    body = orjson.dumps(STARTED)
    expected = [(1, STARTED)]

    assert expected == numbered(framer, body)


def test_a_pretty_printed_single_object_is_one_line(framer: Framer) -> None:
    body = orjson.dumps(FINISHED, option=orjson.OPT_INDENT_2)
    expected = [(1, FINISHED)]

    assert expected == numbered(framer, body)


def test_sse_data_blocks_are_the_lines_numbered_by_their_data_line(framer: Framer) -> None:
    body = sse(STARTED, ERROR, FINISHED)
    expected = [(1, STARTED), (3, ERROR), (5, FINISHED)]

    assert expected == numbered(framer, body, "text/event-stream")


def test_sse_is_recognised_without_a_media_type(framer: Framer) -> None:
    body = sse(STARTED, ERROR)
    expected = [(1, STARTED), (3, ERROR)]

    assert expected == numbered(framer, body)


def test_sse_event_id_retry_and_comment_lines_carry_nothing(framer: Framer) -> None:
    body = (
        b": keep-alive\n\n"
        b"event: message\nid: 7\nretry: 1000\ndata: " + orjson.dumps(STARTED) + b"\n\n"
        b"event: message\ndata: " + orjson.dumps(ERROR) + b"\n\n"
    )
    expected = [(6, STARTED), (9, ERROR)]

    assert expected == numbered(framer, body)


def test_sse_data_split_over_several_data_lines_is_one_event(framer: Framer) -> None:
    body = b'data: {"type": "RUN_STARTED",\ndata: "threadId": "t1", "runId": "r1"}\n\n'
    expected = [(1, STARTED)]

    assert expected == numbered(framer, body, "text/event-stream")


def test_sse_with_crlf_and_no_space_after_data_is_read(framer: Framer) -> None:
    body = b"data:" + orjson.dumps(STARTED) + b"\r\n\r\ndata:" + orjson.dumps(ERROR) + b"\r\n"
    expected = [(1, STARTED), (3, ERROR)]

    assert expected == numbered(framer, body, "text/event-stream")


def test_a_gzip_body_is_undone_first(framer: Framer) -> None:
    body = gzip.compress(ndjson(STARTED, ERROR))
    expected = [(1, STARTED), (2, ERROR)]

    assert expected == numbered(framer, body)


def test_a_gzip_sse_body_is_read_as_sse(framer: Framer) -> None:
    body = gzip.compress(sse(STARTED, ERROR))
    expected = [(1, STARTED), (3, ERROR)]

    assert expected == numbered(framer, body, "text/event-stream")


def test_a_body_that_claims_gzip_but_is_not_is_an_input_error(framer: Framer) -> None:
    with pytest.raises(InputError):
        framer(b"\x1f\x8b" + b"definitely not deflate", None)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(ndjson(STARTED, ERROR, FINISHED), id="ndjson"),
        pytest.param(orjson.dumps([STARTED, ERROR, FINISHED]), id="json-array"),
        pytest.param(sse(STARTED, ERROR, FINISHED), id="sse"),
        pytest.param(gzip.compress(ndjson(STARTED, ERROR, FINISHED)), id="gzip-ndjson"),
    ],
)
def test_every_format_yields_the_same_events_in_order(framer: Framer, body: bytes) -> None:
    expected = [STARTED, ERROR, FINISHED]

    assert expected == [value for _, value in numbered(framer, body)]


def test_every_member_of_a_multi_member_gzip_body_is_read(framer: Framer) -> None:
    body = gzip.compress(ndjson(STARTED)) + gzip.compress(ndjson(ERROR, FINISHED))
    expected = [(1, STARTED), (2, ERROR), (3, FINISHED)]

    assert expected == numbered(framer, body)


def test_the_inflate_limit_counts_every_member() -> None:
    member = gzip.compress(b"\n" * 600)

    assert b"\n" * 1200 == gunzip(member + member, limit=1200)
    with pytest.raises(TooLarge):
        gunzip(member + member, limit=1199)


def test_bytes_after_the_last_gzip_member_are_an_input_error() -> None:
    with pytest.raises(InputError, match="bytes after its last member"):
        gunzip(gzip.compress(b"{}\n") + b"trailing junk")


LINE = orjson.dumps(STARTED)


@pytest.mark.parametrize(
    ("body", "count"),
    [
        pytest.param(LINE + b"\n" + LINE + b"\n" + LINE + b"\n", 3, id="lf-final-newline"),
        pytest.param(LINE + b"\n" + LINE + b"\n" + LINE, 3, id="lf-no-final-newline"),
        pytest.param(LINE + b"\r\n" + LINE + b"\r\n" + LINE + b"\r\n", 3, id="crlf-final-newline"),
        pytest.param(LINE + b"\r\n" + LINE + b"\r\n" + LINE, 3, id="crlf-no-final-newline"),
        pytest.param(LINE + b"\n\n" + LINE + b"\n", 3, id="a-blank-line-counts"),
        pytest.param(LINE + b"\n" + LINE + b"\n  ", 3, id="blanks-after-the-last-newline-count"),
        pytest.param(LINE + b"\n", 1, id="one-line"),
    ],
)
def test_ndjson_has_as_many_lines_as_wc_l_counts_the_last_one_unended_or_not(
    body: bytes, count: int, framer: Framer
) -> None:
    """The newline after the last line starts no line of its own (issue 33: a file of exactly
    the limit's lines was refused as one over it)."""
    assert count == len(framer(body, None))
    assert count == len(frame(body).lines)
