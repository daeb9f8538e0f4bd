"""Identity on SQLite and PostgreSQL: every run-scoped fact is its thread's, ids are opaque
(any character, `/`, `@` and spaces included), and a requestId is looked up, never parsed."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
from sqlalchemy import Engine

from sidewatch.app.audit import Auditor, audit
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.app.read import Read
from sidewatch.config import Config
from sidewatch.core.facts import InterruptFact, RunFact
from sidewatch.core.policy import DEFAULT_POLICY, Need
from sidewatch.ingest.agui import Interpreter
from sidewatch.ingest.bounds import ID_MAX
from sidewatch.ingest.reader import frame
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store
from tests.ingest.producers.test_adk import ADK
from tests.ingest.producers.test_langgraph import LANGGRAPH

PRODUCERS = Path(__file__).resolve().parents[1] / "ingest" / "producers" / "fixtures"
NOW = 1_785_083_400_000
MIN = 60_000
# These producers report no route, handle or heartbeat.
QUIET = replace(
    DEFAULT_POLICY, name="quiet", route=Need.IGNORED, handle=Need.IGNORED, heartbeat=Need.IGNORED
)


def _ingest(engine: Engine, body: bytes, at: int) -> None:
    summary = Ingest(Store(engine), ref_protector(engine, Config()), Config()).body(
        "test", body, at
    )
    assert () == summary.rejects


def _lines(*lines: dict[str, Any]) -> bytes:
    return b"\n".join(orjson.dumps(line) for line in lines)


@pytest.mark.parametrize(
    "order",
    [
        ("langgraph-approve-resume10", "langgraph-approve-legacy"),
        ("langgraph-approve-legacy", "langgraph-approve-resume10"),
        ("langgraph-approve-legacy+langgraph-approve-resume10",),
    ],
    ids=["resume10-first", "legacy-first", "one-unit"],
)
def test_two_threads_that_number_their_runs_alike_are_both_resumed(
    db_url: str, order: tuple[str, ...]
) -> None:
    """Both captures use run-1 and run-2 (and the same tool-call id): the issue's reproduction."""
    engine = open_store(db_url)
    for unit in order:
        body = b"\n".join((PRODUCERS / f"{n}.ndjson").read_bytes() for n in unit.split("+"))
        _ingest(engine, body, NOW - 60_000)

    verdicts = {
        a.evidence.thread_id: a.verdict.state.value
        for a in audit(Store(engine), (QUIET,), NOW + 10 * MIN)
    }
    engine.dispose()

    assert {
        "thread-lg-approve-resume": "RESUMED",
        "thread-lg-approve-legacy": "RESUMED",
    } == verdicts


# Threads whose ids hold `/`, `@` and spaces, and that all reuse the same run, interrupt and
# tool-call ids. A parsed default requestId (`{thread}/{interrupt}`) names the wrong thread
# for each of them: `a/b@c d` splits into thread `a`, `a/b` into `a` too.
THREADS = ("team/ops@eu west", "team/ops", "team")
RUN1, RUN2, INTERRUPT, CALL = "run-1", "run-2", "approve/deploy@v2 now", "call 1"


def _asked(thread: str, at: int) -> list[dict[str, Any]]:
    """Run 1 proposes a gated call and stops on the interrupt for it."""
    return [
        {"threadId": thread, "runId": RUN1, "messages": [], "timestamp": at - 3000},
        {"type": "RUN_STARTED", "threadId": thread, "runId": RUN1, "timestamp": at - 3000},
        {
            "type": "TOOL_CALL_START",
            "toolCallId": CALL,
            "toolCallName": f"deploy {thread}",
            "timestamp": at - 2000,
        },
        {"type": "TOOL_CALL_ARGS", "toolCallId": CALL, "delta": "{}", "timestamp": at - 2000},
        {"type": "TOOL_CALL_END", "toolCallId": CALL, "timestamp": at - 1000},
        {
            "type": "RUN_FINISHED",
            "threadId": thread,
            "runId": RUN1,
            "outcome": {
                "type": "interrupt",
                "interrupts": [{"id": INTERRUPT, "reason": "tool_call", "toolCallId": CALL}],
            },
            "timestamp": at,
        },
    ]


def _answered(thread: str, approved: bool, at: int) -> list[dict[str, Any]]:
    """Run 2's input answers the interrupt; the run starts, runs the call and finishes."""
    resume = {"interruptId": INTERRUPT, "status": "resolved", "payload": {"approved": approved}}
    return [
        {
            "threadId": thread,
            "runId": RUN2,
            "messages": [],
            "resume": [resume],
            "timestamp": at,
        },
        {"type": "RUN_STARTED", "threadId": thread, "runId": RUN2, "timestamp": at},
        {
            "type": "TOOL_CALL_RESULT",
            "toolCallId": CALL,
            "messageId": "m",
            "content": "ok",
            "threadId": thread,
            "runId": RUN2,
            "timestamp": at + 1000,
        },
        {"type": "RUN_FINISHED", "threadId": thread, "runId": RUN2, "timestamp": at + 2000},
    ]


def _story(at: int) -> bytes:
    """One unit, threads interleaved: the first is approved and resumed, the second declined,
    the third left waiting."""
    return _lines(
        *_asked(THREADS[0], at),
        *_asked(THREADS[1], at),
        *_asked(THREADS[2], at),
        *_answered(THREADS[0], True, at + MIN),
        *_answered(THREADS[1], False, at + MIN),
    )


def _interleaved(at: int) -> bytes:
    """One unit: each thread starts its run and streams its tool call (all three with the same
    call id) before any of the runs stops on its interrupt."""
    asked = [_asked(t, at) for t in THREADS]
    return _lines(*(line for a in asked for line in a[:-1]), *(a[-1] for a in asked))


def _by_thread(engine: Engine, at: int) -> dict[str, tuple[str, str, str | None]]:
    return {
        a.evidence.thread_id: (a.evidence.request_id, a.verdict.state.value, a.evidence.action)
        for a in audit(Store(engine), (QUIET,), at)
    }


@pytest.mark.parametrize("split", ["one-unit", "unit-per-thread", "interleaved"])
def test_threads_with_odd_ids_that_share_run_interrupt_and_call_ids_keep_their_own_waits(
    db_url: str, split: str
) -> None:
    engine = open_store(db_url)
    if split == "interleaved":
        _ingest(engine, _interleaved(NOW), NOW)
        answers = _answered(THREADS[0], True, NOW + MIN) + _answered(THREADS[1], False, NOW + MIN)
        _ingest(engine, _lines(*answers), NOW + MIN)
    elif split == "unit-per-thread":
        for i, thread in enumerate(THREADS):
            answer = _answered(thread, i == 0, NOW + MIN) if i < 2 else []
            _ingest(engine, _lines(*_asked(thread, NOW), *answer), NOW)
    else:
        _ingest(engine, _story(NOW), NOW)

    got = _by_thread(engine, NOW + 3 * MIN)
    engine.dispose()

    assert {
        THREADS[0]: (f"{THREADS[0]}/{INTERRUPT}", "RESUMED", f"deploy {THREADS[0]}"),
        THREADS[1]: (f"{THREADS[1]}/{INTERRUPT}", "CLOSED_BY_DECLINE", f"deploy {THREADS[1]}"),
        THREADS[2]: (f"{THREADS[2]}/{INTERRUPT}", "WAITING", f"deploy {THREADS[2]}"),
    } == got


def test_a_decision_naming_a_default_request_id_reaches_its_own_thread(db_url: str) -> None:
    """The requestId `team/ops@eu west/approve/deploy@v2 now` names the first thread's wait:
    it marks that thread dirty and is applied to its wait only, never to a thread got by
    taking the id apart."""
    engine = open_store(db_url)
    _ingest(engine, _lines(*(line for t in THREADS for line in _asked(t, NOW))), NOW)
    auditor = Auditor(Store(engine), (QUIET,))
    auditor.tick(NOW + MIN)
    request_id = f"{THREADS[0]}/{INTERRUPT}"
    decision = {
        "type": "CUSTOM",
        "name": "sidewatch.decision",
        "value": {"requestId": request_id, "decision": "accept"},
        "timestamp": NOW + 2 * MIN,
    }
    _ingest(engine, _lines(decision), NOW + 2 * MIN)

    dirty = {t for t, _ in auditor.state.dirty()}
    auditor.tick(NOW + 10 * MIN)  # the decision's 5-minute resume grace has run out
    got = {r: s.state for r, s in auditor.state.states(THREADS).items()}
    engine.dispose()

    assert {THREADS[0]} == dirty
    assert {
        f"{THREADS[0]}/{INTERRUPT}": "STUCK_AFTER_DECISION",
        f"{THREADS[1]}/{INTERRUPT}": "WAITING",
        f"{THREADS[2]}/{INTERRUPT}": "WAITING",
    } == got


@pytest.mark.parametrize("thread", THREADS)
def test_one_wait_is_found_by_its_request_id_before_any_tick(db_url: str, thread: str) -> None:
    """`GET /v1/waits/{requestId}` of a wait the auditor has not recorded yet: found by the
    stored facts, not by splitting the id at `@` and `/`."""
    engine = open_store(db_url)
    _ingest(engine, _story(NOW), NOW)
    store = Store(engine)
    auditor = Auditor(store, (QUIET,))

    body = Read(store, auditor.policy_for).wait(f"{thread}/{INTERRUPT}", int(time.time() * 1000))
    engine.dispose()

    assert body is not None
    assert (thread, RUN1, f"deploy {thread}") == (body["threadId"], body["runId"], body["action"])


def test_a_run_id_alone_that_two_threads_of_the_unit_use_is_refused_not_guessed() -> None:
    """`run-1` is a run of two threads in this unit: a line naming only the run id cannot say
    which, and is rejected; naming the run in context is still that run."""
    body = _lines(
        {"type": "RUN_STARTED", "threadId": THREADS[0], "runId": RUN1},
        {"type": "RUN_STARTED", "threadId": THREADS[1], "runId": RUN1},
        {"type": "RUN_STARTED", "threadId": THREADS[2], "runId": RUN2},
        {"type": "RUN_ERROR", "runId": RUN1, "message": "boom"},
        {"type": "RUN_ERROR", "runId": RUN2, "message": "boom"},
    )

    result = Interpreter(NOW, 0, lambda ref: ref).read(frame(body))

    assert [(4, "no_run_context")] == [(r.line, r.reason) for r in result.rejects]
    errors = [(f.thread_id, f.run_id) for f in result.facts if isinstance(f, RunFact)][3:]
    assert [(THREADS[2], RUN2)] == errors


def test_the_longest_default_request_id_is_recorded(db_url: str) -> None:
    """Ids of the longest accepted length, an interrupt id reused after its wait closed: the
    new wait's default requestId `{threadId}/{interruptId}@{runId}` is 602 characters, and
    the auditor records it on both stores."""
    thread, interrupt = "t" * ID_MAX, "i" * ID_MAX
    first, answer, again = "a" * ID_MAX, "b" * ID_MAX, "c" * ID_MAX
    outcome = {"type": "interrupt", "interrupts": [{"id": interrupt, "reason": "tool_call"}]}
    resume = {"interruptId": interrupt, "status": "resolved", "payload": {"approved": False}}
    body = _lines(
        {"type": "RUN_STARTED", "threadId": thread, "runId": first, "timestamp": NOW},
        {
            "type": "RUN_FINISHED",
            "threadId": thread,
            "runId": first,
            "outcome": outcome,
            "timestamp": NOW,
        },
        {
            "threadId": thread,
            "runId": answer,
            "messages": [],
            "resume": [resume],
            "timestamp": NOW + 1,
        },
        {"type": "RUN_STARTED", "threadId": thread, "runId": again, "timestamp": NOW + 2},
        {
            "type": "RUN_FINISHED",
            "threadId": thread,
            "runId": again,
            "outcome": outcome,
            "timestamp": NOW + 2,
        },
    )
    engine = open_store(db_url)
    _ingest(engine, body, NOW)
    auditor = Auditor(Store(engine), (QUIET,))

    auditor.tick(NOW + MIN)
    got = {r: s.state for r, s in auditor.state.states([thread]).items()}
    engine.dispose()

    assert {
        f"{thread}/{interrupt}": "CLOSED_BY_DECLINE",
        f"{thread}/{interrupt}@{again}": "WAITING",
    } == got


CAPTURES = {**LANGGRAPH, **ADK}


@pytest.mark.parametrize("one_unit", [True, False], ids=["one-unit", "two-units"])
@pytest.mark.parametrize(("name", "expected"), CAPTURES.items(), ids=list(CAPTURES))
def test_a_capture_and_its_twin_thread_each_get_the_verdicts_of_what_happened(
    db_url: str, name: str, expected: list[tuple[str, str | None, bool]], one_unit: bool
) -> None:
    """Every producer capture beside a copy on another thread (an id with `/`, `@` and a
    space): the two share every run, interrupt and tool-call id, as numbered runs and
    deterministic producer ids do, and each thread gets the verdicts of the capture alone."""
    body = (PRODUCERS / f"{name}.ndjson").read_bytes()
    (thread,) = {
        f.thread_id
        for f in Interpreter(NOW, 0, lambda r: r).read(frame(body)).facts
        if isinstance(f, RunFact)
    }
    twin_thread = f"twin/{thread}@eu west"
    twin = body.replace(f'"{thread}"'.encode(), orjson.dumps(twin_thread))
    engine = open_store(db_url)
    for unit in [body + b"\n" + twin] if one_unit else [body, twin]:
        _ingest(engine, unit, NOW - 60_000)

    got: dict[str, list[tuple[str, str | None, bool]]] = {thread: [], twin_thread: []}
    for a in audit(Store(engine), (QUIET,), NOW):
        v = a.verdict
        got[a.evidence.thread_id].append(
            (v.state.value, v.facts.decision and v.facts.decision.value, v.uncertain)
        )
    engine.dispose()

    assert {thread: expected, twin_thread: expected} == got


def test_a_call_id_another_thread_opens_while_one_is_open_keeps_both_calls() -> None:
    """Thread 0 streams `call 1` and, before it ends, thread 1 starts its own `call 1`: the
    first is ended (with what was streamed) rather than lost, and each interrupt gets its own
    thread's call."""
    stop = {
        "type": "interrupt",
        "interrupts": [{"id": INTERRUPT, "reason": "tool_call", "toolCallId": CALL}],
    }
    body = _lines(
        {"type": "RUN_STARTED", "threadId": THREADS[0], "runId": RUN1},
        {"type": "TOOL_CALL_START", "toolCallId": CALL, "toolCallName": "deploy"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": CALL, "delta": "{}"},
        {"type": "RUN_STARTED", "threadId": THREADS[1], "runId": RUN1},
        {"type": "TOOL_CALL_START", "toolCallId": CALL, "toolCallName": "rollback"},
        {"type": "TOOL_CALL_END", "toolCallId": CALL},
        {"type": "RUN_FINISHED", "threadId": THREADS[0], "runId": RUN1, "outcome": stop},
        {"type": "RUN_FINISHED", "threadId": THREADS[1], "runId": RUN1, "outcome": stop},
    )

    result = Interpreter(NOW, 0, lambda ref: ref).read(frame(body))

    actions = {f.thread_id: f.action for f in result.facts if isinstance(f, InterruptFact)}
    assert {THREADS[0]: "deploy", THREADS[1]: "rollback"} == actions
