"""The tap sends a subagent's events and an interrupt's `subagentRunId` reduced to what the
daemon reads (ids, name, state, the interrupts of a suspension), and the daemon reads the same
facts from them as from the whole events; descriptions, results and messages stay behind."""

from __future__ import annotations

from typing import Any

import orjson

from sidewatch.ingest.agui import Interpreter, UnitResult
from sidewatch.ingest.digest import RefProtector
from sidewatch_tap.reduce import reduce_event, skipped_by_head

S = "SENTINEL-5ub"
AT = 1_785_081_600_000
EVENTS: list[dict[str, Any]] = [
    {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1", "timestamp": AT},
    {
        "type": "SUBAGENT_STARTED",
        "subagentRunId": "sub-1",
        "name": "researcher",
        "description": f"{S}-description",
        "metadata": {"k": f"{S}-metadata"},
        "timestamp": AT + 1,
    },
    {"type": "SUBAGENT_ERROR", "subagentRunId": "sub-2", "message": f"{S}-error", "code": S},
    {
        "type": "SUBAGENT_FINISHED",
        "subagentRunId": "sub-1",
        "result": {"text": f"{S}-result"},
        "outcome": {"type": "suspended", "interruptIds": ["i1"]},
        "timestamp": AT + 2,
    },
    {
        "type": "CUSTOM",
        "name": "on_interrupt",
        "value": '{"message": "' + S + '"}',
        "rawEvent": {"id": "i0", "value": S},
        "subagentRunId": "sub-1",
    },
    {
        "type": "RUN_FINISHED",
        "threadId": "t1",
        "runId": "r1",
        "timestamp": AT + 3,
        "outcome": {
            "type": "interrupt",
            "interrupts": [
                {"id": "i1", "reason": "tool_call", "subagentRunId": "sub-1", "message": S}
            ],
        },
    },
]


def interpret(lines: list[dict[str, Any]]) -> UnitResult:
    interp = Interpreter(AT + 10, 0, RefProtector(b"k", ("role:",)))
    for n, line in enumerate(lines, start=1):
        interp.feed(n, orjson.dumps(line))
    return interp.finish()


def test_the_daemon_reads_the_same_subagent_facts_from_what_the_tap_sends() -> None:
    sent = [reduce_event(e) for e in EVENTS]

    assert all(s is not None for s in sent)
    assert not any(skipped_by_head(orjson.dumps(e)) for e in EVENTS)
    whole, reduced = interpret(EVENTS), interpret([s for s in sent if s is not None])
    assert ([], whole.facts) == (reduced.rejects, reduced.facts)
    assert S not in orjson.dumps(sent).decode()
