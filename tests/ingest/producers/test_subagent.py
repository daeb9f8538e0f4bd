"""AG-UI 1.0 subagents: `SUBAGENT_STARTED`, `SUBAGENT_FINISHED` (success or suspended) and
`SUBAGENT_ERROR` lines, and an interrupt's `subagentRunId`, read into content-free facts; the
wait a subagent raised carries it in its evidence, and a subagent's suspension opens no wait."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from sqlalchemy import text

from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.core.engine import evaluate
from sidewatch.core.facts import AnswerFact, InterruptFact, RunFact, SubagentFact, ThreadFacts
from sidewatch.core.model import State, Subagent, SubagentState
from sidewatch.core.policy import DEFAULT_POLICY, Policy
from sidewatch.core.vocab import LineKind, RejectReason
from sidewatch.ingest.agui import Interpreter, UnitResult
from sidewatch.ingest.digest import RefProtector
from sidewatch.report.verdicts import verdict_json
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store

BASE = 1_785_081_600_000  # 2026-07-26T16:00:00Z
SEC = 1000
MIN = 60 * SEC
RECEIVED = BASE + 60 * MIN
PROTECT = RefProtector(b"test-key", ("role:", "policy:"))
SECRETS = {
    "description": "SECRET-SUBAGENT-DESCRIPTION-51a2",
    "result": "SECRET-SUBAGENT-RESULT-77c0",
    "error": "SECRET-SUBAGENT-ERROR-9e13",
    "interrupt": "SECRET-INTERRUPT-MESSAGE-3b3b",
    "meta": "SECRET-SUBAGENT-METADATA-0d0d",
}


def interpret(*lines: dict[str, Any] | bytes) -> UnitResult:
    """One unit's lines (line n is the n-th argument): a fact's seq is then its line."""
    interp = Interpreter(RECEIVED, 0, PROTECT)
    for n, line in enumerate(lines, start=1):
        interp.feed(n, line if isinstance(line, bytes) else orjson.dumps(line))
    return interp.finish()


def run_started(run: str = "r1", at: int = BASE) -> dict[str, Any]:
    return {"type": "RUN_STARTED", "threadId": "t1", "runId": run, "timestamp": at}


def started(sub: str = "sub-1", at: int = BASE + SEC, **kw: Any) -> dict[str, Any]:
    return {
        "type": "SUBAGENT_STARTED",
        "subagentRunId": sub,
        "name": "researcher",
        "description": SECRETS["description"],
        "parentToolCallId": "call-task",
        "metadata": {"note": SECRETS["meta"]},
        "timestamp": at,
        **kw,
    }


def suspended(*ids: str, sub: str = "sub-1", at: int = BASE + 2 * SEC) -> dict[str, Any]:
    return {
        "type": "SUBAGENT_FINISHED",
        "subagentRunId": sub,
        "outcome": {"type": "suspended", "interruptIds": list(ids)},
        "timestamp": at,
    }


def finished(sub: str = "sub-1", at: int = BASE + 2 * SEC, **kw: Any) -> dict[str, Any]:
    return {
        "type": "SUBAGENT_FINISHED",
        "subagentRunId": sub,
        "result": {"answer": SECRETS["result"]},
        "timestamp": at,
        **kw,
    }


def error(sub: str = "sub-1", at: int = BASE + 2 * SEC) -> dict[str, Any]:
    return {
        "type": "SUBAGENT_ERROR",
        "subagentRunId": sub,
        "message": SECRETS["error"],
        "code": "TOOL_FAILED",
        "timestamp": at,
    }


def interrupted(*interrupts: dict[str, Any], run: str = "r1", at: int = BASE + 3 * SEC) -> Any:
    return {
        "type": "RUN_FINISHED",
        "threadId": "t1",
        "runId": run,
        "timestamp": at,
        "outcome": {"type": "interrupt", "interrupts": list(interrupts)},
    }


def interrupt(interrupt_id: str = "i1", **fields: Any) -> dict[str, Any]:
    return {"id": interrupt_id, "reason": "tool_call", "message": SECRETS["interrupt"], **fields}


def run_finished(run: str = "r1", at: int = BASE + 3 * SEC) -> dict[str, Any]:
    return {"type": "RUN_FINISHED", "threadId": "t1", "runId": run, "timestamp": at}


def subagents(result: UnitResult) -> list[SubagentFact]:
    return [f for f in result.facts if isinstance(f, SubagentFact)]


def verdicts(result: UnitResult, now: int) -> list[dict[str, Any]]:
    """Every wait of thread t1 as the read API shows it, at `now`."""

    def of(kind: type[Any]) -> tuple[Any, ...]:
        return tuple(f for f in result.facts if isinstance(f, kind))

    facts = ThreadFacts(
        thread_id="t1",
        interrupts=of(InterruptFact),
        runs=of(RunFact),
        answers=of(AnswerFact),
        subagents=of(SubagentFact),
    )

    def policy_for(action: str | None, reason: str | None) -> Policy:
        return DEFAULT_POLICY

    out = []
    for w in evaluate(facts, policy_for, now).waits:
        assert w.verdict is not None
        out.append(verdict_json(w.evidence, w.verdict))
    return out


# -- each event, valid -------------------------------------------------------------------


def test_a_subagent_start_is_kept_as_its_ids_name_and_time_only() -> None:
    result = interpret(run_started(), started())
    expected = [
        SubagentFact(
            thread_id="t1",
            run_id="r1",
            subagent_run_id="sub-1",
            state=SubagentState.RUNNING,
            at=BASE + SEC,
            seq=2,
            name="researcher",
        )
    ]

    assert (expected, [], 2, 0) == (
        subagents(result),
        result.rejects,
        result.accepted,
        result.skipped,
    )


@pytest.mark.parametrize(
    ("line", "state", "ids"),
    [
        pytest.param(finished(), SubagentState.FINISHED, (), id="no-outcome"),
        pytest.param(
            finished(outcome={"type": "success"}), SubagentState.FINISHED, (), id="success"
        ),
        pytest.param(suspended("i1", "i2"), SubagentState.SUSPENDED, ("i1", "i2"), id="suspended"),
        pytest.param(suspended(), SubagentState.SUSPENDED, (), id="suspended-by-a-descendant"),
        pytest.param(error(), SubagentState.ERROR, (), id="error"),
    ],
)
def test_a_subagent_end_is_kept_as_its_state(
    line: dict[str, Any], state: SubagentState, ids: tuple[str, ...]
) -> None:
    result = interpret(run_started(), line)
    expected = [
        SubagentFact(
            thread_id="t1",
            run_id="r1",
            subagent_run_id="sub-1",
            state=state,
            at=BASE + 2 * SEC,
            seq=2,
            interrupt_ids=ids,
        )
    ]

    assert (expected, [], {LineKind.RUN: 1, LineKind.SUBAGENT: 1}) == (
        subagents(result),
        result.rejects,
        dict(result.kinds),
    )


def test_an_interrupt_with_a_subagent_run_id_records_the_subagent() -> None:
    result = interpret(run_started(), interrupted(interrupt("i1", subagentRunId="sub-1")))

    facts = [f for f in result.facts if isinstance(f, InterruptFact)]

    assert [("i1", "sub-1")] == [(f.interrupt_id, f.subagent_run_id) for f in facts]


# -- each event, malformed: a clear reason, and the rest of the unit kept -------------------


@pytest.mark.parametrize(
    ("line", "reason", "error"),
    [
        pytest.param(
            {"type": "SUBAGENT_STARTED", "name": "researcher"},
            RejectReason.INVALID_FIELD,
            "SUBAGENT_STARTED: subagentRunId: Field required",
            id="started-without-id",
        ),
        pytest.param(
            {"type": "SUBAGENT_STARTED", "subagentRunId": "sub-1"},
            RejectReason.INVALID_FIELD,
            "SUBAGENT_STARTED: name: Field required",
            id="started-without-name",
        ),
        pytest.param(
            {"type": "SUBAGENT_STARTED", "subagentRunId": "s" * 201, "name": "researcher"},
            RejectReason.INVALID_ID,
            "SUBAGENT_STARTED: subagentRunId: must be at most 200 characters",
            id="started-id-too-long",
        ),
        pytest.param(
            {"type": "SUBAGENT_STARTED", "subagentRunId": "sub-1", "name": "bad\nname"},
            RejectReason.INVALID_ID,
            "SUBAGENT_STARTED: name: must not hold control characters",
            id="started-name-with-control",
        ),
        pytest.param(
            {"type": "SUBAGENT_FINISHED", "subagentRunId": "sub-1", "outcome": {"type": "paused"}},
            RejectReason.INVALID_FIELD,
            "SUBAGENT_FINISHED: outcome: 'type' should be one of 'success', 'suspended'",
            id="finished-unknown-outcome",
        ),
        pytest.param(
            {
                "type": "SUBAGENT_FINISHED",
                "subagentRunId": "sub-1",
                "outcome": {"type": "suspended", "interruptIds": "i1"},
            },
            RejectReason.INVALID_FIELD,
            "SUBAGENT_FINISHED: outcome.suspended.interruptIds: Input should be a valid list",
            id="finished-ids-not-a-list",
        ),
        pytest.param(
            {
                "type": "SUBAGENT_FINISHED",
                "subagentRunId": "sub-1",
                "outcome": {"type": "suspended", "interruptIds": ["i\x001"]},
            },
            RejectReason.INVALID_ID,
            "SUBAGENT_FINISHED: outcome.interruptIds.0: must not hold control characters",
            id="finished-id-with-nul",
        ),
        pytest.param(
            {"type": "SUBAGENT_ERROR", "subagentRunId": "sub-1"},
            RejectReason.INVALID_FIELD,
            "SUBAGENT_ERROR: message: Field required",
            id="error-without-message",
        ),
        pytest.param(
            {"type": "SUBAGENT_ERROR", "subagentRunId": 7, "message": SECRETS["error"]},
            RejectReason.INVALID_FIELD,
            "SUBAGENT_ERROR: subagentRunId: Input should be a valid string",
            id="error-id-not-a-string",
        ),
        pytest.param(
            {**error(), "timestamp": 1_785_081_600},
            RejectReason.TIME_OUT_OF_RANGE,
            "timestamp: must be ms since the epoch between 2000-01-01 and 2200-01-01",
            id="error-time-in-seconds",
        ),
    ],
)
def test_a_malformed_subagent_line_is_rejected_and_nothing_else_is_lost(
    line: dict[str, Any], reason: RejectReason, error: str
) -> None:
    result = interpret(
        run_started(), started(), line, interrupted(interrupt("i1", subagentRunId="sub-1"))
    )
    expected = (
        [(3, reason, error)],
        [("sub-1", SubagentState.RUNNING)],
        ["i1"],
    )

    assert expected == (
        [(r.line, r.reason, r.error) for r in result.rejects],
        [(f.subagent_run_id, f.state) for f in subagents(result)],
        [f.interrupt_id for f in result.facts if isinstance(f, InterruptFact)],
    )
    assert all(s not in r.error for r in result.rejects for s in SECRETS.values())


def test_a_subagent_line_without_a_run_is_rejected_with_its_reason() -> None:
    result = interpret(started())

    assert [(1, RejectReason.NO_RUN_CONTEXT)] == [(r.line, r.reason) for r in result.rejects]


def test_an_interrupt_with_a_bad_subagent_run_id_rejects_its_line() -> None:
    result = interpret(run_started(), interrupted(interrupt("i1", subagentRunId="s\x07")))

    assert [
        (
            2,
            RejectReason.INVALID_ID,
            "RUN_FINISHED: outcome.interrupts.0: subagentRunId: must not hold control characters",
        )
    ] == [(r.line, r.reason, r.error) for r in result.rejects]


# -- the wait's evidence -------------------------------------------------------------------


def test_a_suspended_subagent_is_the_evidence_of_the_parents_wait_and_opens_none() -> None:
    result = interpret(run_started(), started(), suspended("i1"), interrupted(interrupt("i1")))

    waits = verdicts(result, BASE + MIN)
    expected = [
        (
            "t1/i1",
            {
                "runId": "sub-1",
                "name": "researcher",
                "state": "suspended",
                "since": "2026-07-26T16:00:02Z",
            },
        )
    ]

    assert expected == [(w["requestId"], w["evidence"]["subagent"]) for w in waits]


def test_a_subagent_suspended_in_a_run_that_succeeded_opens_no_wait() -> None:
    result = interpret(run_started(), started(), suspended("i1"), run_finished())

    assert ([], 4, []) == (verdicts(result, BASE + MIN), result.accepted, result.rejects)


def test_a_subagent_named_only_by_the_interrupt_is_shown_without_a_state() -> None:
    result = interpret(run_started(), interrupted(interrupt("i1", subagentRunId="sub-9")))

    waits = verdicts(result, BASE + MIN)

    assert [{"runId": "sub-9", "name": None, "state": None, "since": None}] == [
        w["evidence"]["subagent"] for w in waits
    ]


def test_the_subagent_is_shown_as_it_was_at_the_evaluation_time() -> None:
    # The continuing run resumes the subagent and it finishes: a verdict before that still
    # shows it suspended.
    result = interpret(
        run_started(),
        started(),
        suspended("i1"),
        interrupted(interrupt("i1")),
        {
            "threadId": "t1",
            "runId": "r2",
            "messages": [],
            "resume": [{"interruptId": "i1", "status": "resolved", "payload": True}],
            "timestamp": BASE + 5 * MIN,
        },
        run_started("r2", BASE + 5 * MIN),
        started(at=BASE + 5 * MIN + SEC),
        finished(at=BASE + 5 * MIN + 2 * SEC),
        run_finished("r2", BASE + 5 * MIN + 3 * SEC),
    )

    before = verdicts(result, BASE + 4 * MIN)[0]["evidence"]["subagent"]["state"]
    after = verdicts(result, BASE + 6 * MIN)[0]

    assert ("suspended", "finished", "RESUMED") == (
        before,
        after["evidence"]["subagent"]["state"],
        after["state"],
    )


def test_a_subagent_error_is_evidence_only_and_does_not_move_the_wait() -> None:
    # The parent handles a failed subagent (AG-UI: SUBAGENT_ERROR is not RUN_ERROR): the
    # continuing run succeeded, so the wait is RESUMED, and the verdict says the subagent failed.
    result = interpret(
        run_started(),
        started(),
        suspended("i1"),
        interrupted(interrupt("i1")),
        {
            "threadId": "t1",
            "runId": "r2",
            "messages": [],
            "resume": [{"interruptId": "i1", "status": "resolved", "payload": True}],
            "timestamp": BASE + 5 * MIN,
        },
        run_started("r2", BASE + 5 * MIN),
        error(at=BASE + 5 * MIN + SEC),
        run_finished("r2", BASE + 5 * MIN + 3 * SEC),
    )

    wait = verdicts(result, BASE + 6 * MIN)[0]

    assert (State.RESUMED.value, "error", False) == (
        wait["state"],
        wait["evidence"]["subagent"]["state"],
        wait["evidence"]["continuationFailed"],
    )


def test_the_interrupts_own_subagent_wins_over_another_subagents_suspension() -> None:
    result = interpret(
        run_started(),
        started("sub-outer"),
        started("sub-inner", at=BASE + SEC + 1),
        suspended("i1", sub="sub-outer"),
        interrupted(interrupt("i1", subagentRunId="sub-inner")),
    )

    subagent = verdicts(result, BASE + MIN)[0]["evidence"]["subagent"]

    assert ("sub-inner", "running") == (subagent["runId"], subagent["state"])


# -- the store: kept across units, and nothing of the content ----------------------------


def test_the_store_keeps_only_the_subagents_ids_name_state_and_time(
    tmp_path: Path,
) -> None:
    db = tmp_path / "sidewatch.db"
    engine = open_store(f"sqlite:///{db}")
    store = Store(engine)
    lines = [
        run_started(),
        started(),
        {"type": "SUBAGENT_STARTED", "subagentRunId": "sub-2", "name": "writer"},
        error("sub-2"),
        suspended("i1"),
        interrupted(interrupt("i1")),
    ]
    Ingest(store, ref_protector(engine, Config()), Config()).body(
        "test", b"\n".join(orjson.dumps(line) for line in lines), RECEIVED
    )
    with engine.connect() as c:
        rows = sorted(
            tuple(r)
            for r in c.execute(
                text(
                    "SELECT thread_id, run_id, subagent_run_id, state, name, interrupt_ids "
                    "FROM subagent"
                )
            )
        )
    [facts] = store.threads()
    engine.dispose()
    stored = db.read_bytes() + b"".join(p.read_bytes() for p in tmp_path.glob("sidewatch.db-*"))

    assert [
        ("t1", "r1", "sub-1", "running", "researcher", "[]"),
        ("t1", "r1", "sub-1", "suspended", None, '["i1"]'),
        ("t1", "r1", "sub-2", "error", None, "[]"),
        ("t1", "r1", "sub-2", "running", "writer", "[]"),
    ] == rows
    assert {("sub-1", SubagentState.SUSPENDED, ("i1",))} <= {
        (f.subagent_run_id, f.state, f.interrupt_ids) for f in facts.subagents
    }
    assert [] == [name for name, s in SECRETS.items() if s.encode() in stored]


def test_a_subagent_and_its_wait_in_two_units_are_still_linked(
    open_stores: Any,
) -> None:
    store: Store = open_stores()
    ingest = Ingest(store, ref_protector(store.engine, Config()), Config())
    first = [run_started(), started(), suspended("i1")]
    second = [interrupted(interrupt("i1"))]
    for n, lines in enumerate((first, second)):
        body = b"\n".join(orjson.dumps(line) for line in lines)
        ingest.body(f"unit-{n}", body, RECEIVED)

    [facts] = store.threads()
    [wait] = evaluate(facts, lambda a, r: DEFAULT_POLICY, BASE + MIN).waits
    assert wait.verdict is not None

    assert Subagent("sub-1", "researcher", SubagentState.SUSPENDED, BASE + 2 * SEC) == (
        wait.verdict.facts.subagent
    )


def test_a_legacy_on_interrupt_attributed_to_a_subagent_records_it() -> None:
    # ag-ui-langgraph puts `subagentRunId` on the on_interrupt event itself.
    legacy = {
        "type": "CUSTOM",
        "name": "on_interrupt",
        "value": orjson.dumps({"message": SECRETS["interrupt"]}).decode(),
        "rawEvent": {"id": "i1"},
        "subagentRunId": "tools:abc",
    }
    result = interpret(run_started(), legacy, run_finished())

    facts = [f for f in result.facts if isinstance(f, InterruptFact)]

    assert [("i1", "tools:abc")] == [(f.interrupt_id, f.subagent_run_id) for f in facts]


def test_a_legacy_on_interrupt_with_a_bad_subagent_run_id_rejects_its_line() -> None:
    legacy = {
        "type": "CUSTOM",
        "name": "on_interrupt",
        "value": "{}",
        "rawEvent": {"id": "i1"},
        "subagentRunId": ["tools:abc"],
    }
    result = interpret(run_started(), legacy, run_finished())

    assert [
        (2, RejectReason.INVALID_FIELD, "CUSTOM on_interrupt: subagentRunId: must be a string")
    ] == [(r.line, r.reason, r.error) for r in result.rejects]
