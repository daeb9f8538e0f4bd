"""A tool call keyed by (threadId, toolCallId) across units: its parts in a later unit belong
to it, a part of a call never started is a finding, and the calls held between units are
bounded and taken only once a unit is committed."""

from __future__ import annotations

from typing import Any

import orjson

from sidewatch.app.audit import audit
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.core.facts import FindingFact, ToolCallFact
from sidewatch.core.vocab import FindingRule
from sidewatch.ingest.agui import Interpreter, UnitResult
from sidewatch.ingest.digest import RefProtector, action_digest
from sidewatch.ingest.opencalls import OpenCalls
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store

RECEIVED = 1_785_081_600_000
PROTECT = RefProtector(b"test-key", ("role:", "policy:"))
RUN = {"threadId": "t1", "runId": "r1"}


def line(typ: str, **fields: Any) -> bytes:
    return orjson.dumps({"type": typ, **RUN, **fields})


START = line("TOOL_CALL_START", toolCallId="c1", toolCallName="delete_file")
ARGS = line("TOOL_CALL_ARGS", toolCallId="c1", delta='{"path": "/tmp/a"}')
END = line("TOOL_CALL_END", toolCallId="c1")


def unit(calls: OpenCalls, *lines: bytes, seq_base: int = 0, settle: bool = True) -> UnitResult:
    """One unit read with the calls earlier units left, settled as a committed unit is."""
    interp = Interpreter(RECEIVED, seq_base, PROTECT, open_calls=calls)
    res = interp.read_chunks([list(lines)])
    if settle:
        calls.settle(interp.took, interp.left)
    return res


def findings(res: UnitResult) -> list[str]:
    return [f.rule for f in res.facts if isinstance(f, FindingFact)]


def test_a_call_cut_a_line_a_unit_keeps_its_name_and_whole_digest() -> None:
    calls = OpenCalls()

    units = [unit(calls, part, seq_base=i << 20) for i, part in enumerate((START, ARGS, END))]

    expected = [("c1", "delete_file", action_digest("delete_file", '{"path": "/tmp/a"}'))]
    got = [u for res in units for u in res.facts]
    assert expected == [(f.tool_call_id, f.name, f.digest) for f in got]
    assert all(isinstance(f, ToolCallFact) for f in got)
    assert 0 == len(calls)


def test_arguments_and_an_end_of_a_call_never_started_are_findings() -> None:
    res = unit(OpenCalls(), ARGS, END)

    assert [FindingRule.ORPHAN_TOOL_CALL_PART] * 2 == findings(res)
    assert [] == res.rejects


def test_a_part_names_its_call_by_thread_too() -> None:
    calls = OpenCalls()
    unit(calls, START)

    res = unit(calls, line("TOOL_CALL_END", toolCallId="c1", threadId="t2", runId="r1"))

    assert [FindingRule.ORPHAN_TOOL_CALL_PART] == findings(res)
    assert 1 == len(calls)


def test_a_unit_not_committed_leaves_the_held_call_as_it_was() -> None:
    calls = OpenCalls()
    unit(calls, START)

    unit(calls, ARGS, settle=False)  # its transaction rolled back: sent again below
    unit(calls, ARGS)
    res = unit(calls, END)

    expected = action_digest("delete_file", '{"path": "/tmp/a"}')
    assert [expected] == [f.digest for f in res.facts if isinstance(f, ToolCallFact)]


def test_a_call_open_when_its_run_ends_ends_with_it() -> None:
    calls = OpenCalls()
    unit(calls, START, ARGS)

    res = unit(calls, line("RUN_FINISHED"))

    assert ["c1"] == [f.tool_call_id for f in res.facts if isinstance(f, ToolCallFact)]
    assert 0 == len(calls)


def test_past_its_bounds_the_oldest_held_call_is_forgotten_and_its_end_is_a_finding() -> None:
    calls = OpenCalls(max_calls=1)
    unit(calls, START)
    unit(calls, line("TOOL_CALL_START", toolCallId="c2", toolCallName="send_email"))

    res = unit(calls, END)

    assert [FindingRule.ORPHAN_TOOL_CALL_PART] == findings(res)
    assert 1 == len(calls)


def test_held_arguments_are_bounded_in_bytes() -> None:
    calls = OpenCalls(max_bytes=10)

    unit(calls, START, ARGS)

    assert 0 == len(calls)


def test_a_batch_of_units_committed_together_reads_each_call_whole(db_url: str) -> None:
    """ADK's confirmation wait, one event a message of a JetStream batch: the wait's identity
    is in the call's arguments."""
    engine = open_store(db_url)
    store = Store(engine)
    ingest = Ingest(store, ref_protector(engine, Config()), Config())
    original = {"id": "c1", "name": "delete_file", "args": {"path": "/tmp/a"}}
    confirmation = [
        line("RUN_STARTED"),
        line("TOOL_CALL_START", toolCallId="k1", toolCallName="adk_request_confirmation"),
        line("TOOL_CALL_ARGS", toolCallId="k1", delta='{"originalFunctionCall": '),
        line("TOOL_CALL_ARGS", toolCallId="k1", delta=orjson.dumps(original).decode() + "}"),
        line("TOOL_CALL_END", toolCallId="k1"),
        line("RUN_FINISHED"),
    ]

    ingest.units([ingest.read("nats", body, RECEIVED) for body in confirmation])
    waits = [(a.evidence.interrupt_id, a.evidence.action) for a in audit(store, (), RECEIVED)]
    engine.dispose()

    assert [("k1", "delete_file")] == waits
    assert 0 == len(ingest.open_calls)
