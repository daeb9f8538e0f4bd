"""The tap keeps what the daemon reads of a Mastra suspension: `metadata.mastra`'s tool name and
arguments (the action and its digest; the daemon digests the arguments and drops them), so every
Mastra capture, reduced as the tap sends it, gives the daemon the facts of the whole capture;
the question Mastra's tool asked (`suspendPayload`) stays behind."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from sidewatch.ingest.agui import Interpreter, UnitResult
from sidewatch.ingest.digest import RefProtector
from sidewatch_tap.reduce import reduce_event, reduce_input
from tests.ingest.producers.captures import CAPTURES
from tests.tap.test_reduce_subagents import AT

MASTRA = sorted(CAPTURES.glob("mastra-*.ndjson"))


def _sent(line: dict[str, Any]) -> dict[str, Any] | None:
    return reduce_event(line) if "type" in line else reduce_input(line)


def interpret(lines: list[tuple[int, dict[str, Any]]]) -> UnitResult:
    """The facts of these lines, each at its line number in the capture."""
    interp = Interpreter(AT + 10, 0, RefProtector(b"k", ("role:",)))
    for n, line in lines:
        interp.feed(n, orjson.dumps(line))
    return interp.finish()


@pytest.mark.parametrize("capture", MASTRA, ids=lambda p: p.stem)
def test_the_daemon_reads_the_same_mastra_facts_from_what_the_tap_sends(capture: Any) -> None:
    raw = [orjson.loads(r) for r in capture.read_bytes().splitlines() if r.strip()]
    lines = list(enumerate(raw, start=1))
    sent = [(n, s) for n, line in lines if (s := _sent(line)) is not None]

    whole, reduced = interpret(lines), interpret(sent)

    assert [] == reduced.rejects
    assert whole.facts == reduced.facts
    assert "suspendPayload" not in orjson.dumps([s for _, s in sent]).decode()


def test_a_mastra_capture_has_a_suspension_whose_action_the_tap_keeps() -> None:
    lines = [orjson.loads(raw) for raw in MASTRA[0].read_bytes().splitlines() if raw.strip()]
    finished = [s for s in map(_sent, lines) if s and s.get("type") == "RUN_FINISHED"]

    kept = [
        i["metadata"]["mastra"]
        for s in finished
        for i in s.get("outcome", {}).get("interrupts", [])
    ]
    assert kept
    assert all(set(m) == {"toolName", "args"} for m in kept)
