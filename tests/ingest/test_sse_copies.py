"""The SSE framing lives in two byte-identical copies, one per distribution: the daemon's
(`sidewatch.ingest.sse`) and the tap's (`sidewatch_tap.sse`), so neither imports a package it
does not declare (docs/internals/distributions.md)."""

from __future__ import annotations

from pathlib import Path

import sidewatch.ingest.sse
import sidewatch_tap.sse

ROOT = Path(__file__).resolve().parents[2]


def test_the_daemons_and_the_taps_sse_framing_are_the_same_file() -> None:
    daemon = Path(sidewatch.ingest.sse.__file__).read_bytes()
    tap = Path(sidewatch_tap.sse.__file__).read_bytes()

    assert tap == daemon, "copy tap/sidewatch_tap/sse.py over sidewatch/ingest/sse.py (or back)"


def test_both_copies_are_the_ones_in_this_checkout() -> None:
    """Not a stale installed copy: the comparison above reads this source tree."""
    paths = {Path(m.__file__).resolve() for m in (sidewatch.ingest.sse, sidewatch_tap.sse)}

    assert {ROOT / "sidewatch/ingest/sse.py", ROOT / "tap/sidewatch_tap/sse.py"} == paths


def test_the_daemon_frames_an_sse_body_without_the_tap() -> None:
    """The copy the daemon reads with is its own: the same events from the same bytes."""
    body = b'event: x\r\ndata: {"a": 1}\r\n\r\ndata: {"b":\ndata: 2}\n\n'

    assert list(sidewatch_tap.sse.sse_items(body)) == list(sidewatch.ingest.sse.sse_items(body))
    assert [(2, b'{"a": 1}'), (4, b'{"b":\n2}')] == list(sidewatch.ingest.sse.sse_items(body))
