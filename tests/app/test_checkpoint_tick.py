"""A long thread's tick resumes from its checkpoint (store.checkpoint), on SQLite and
PostgreSQL: it reads only the facts after the cut, and gives the verdicts a whole evaluation
gives; a fact timed before the cut that arrives later makes the thread evaluated whole."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
from sqlalchemy import event, text

from sidewatch.app import evaluate as evaluation
from sidewatch.app.audit import Auditor
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.app.read import Read
from sidewatch.config import Config
from sidewatch.core.engine import evaluate
from sidewatch.core.policy import DEFAULT_POLICY, Need, Policy
from sidewatch.store import repo, suffix
from sidewatch.store.auditstate import AuditState
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store

QUIET = replace(
    DEFAULT_POLICY, name="default", route=Need.IGNORED, handle=Need.IGNORED, heartbeat=Need.IGNORED
)
THREAD = "long / thread@1"
START = 1_785_000_000_000
RUNS = 60  # a wait every 10 runs


def _run(i: int) -> list[dict[str, Any]]:
    """Run i: every 10th asks to deploy and stops on its interrupt; the next one approves it."""
    run, at = f"run-{i}", START + i * 1000
    resume = []
    if i % 10 == 1 and i > 1:
        resume = [{"interruptId": f"approve-{i - 1}", "status": "resolved", "payload": {}}]
    lines: list[dict[str, Any]] = [
        {"threadId": THREAD, "runId": run, "messages": [], "resume": resume, "timestamp": at},
        {"type": "RUN_STARTED", "threadId": THREAD, "runId": run, "timestamp": at},
    ]
    end: dict[str, Any] = {"type": "RUN_FINISHED", "threadId": THREAD, "runId": run}
    if i % 10 == 0:
        end["outcome"] = {
            "type": "interrupt",
            "interrupts": [{"id": f"approve-{i}", "reason": "confirm"}],
        }
    return [*lines, {**end, "timestamp": at + 2}]


def _ingest(store: Store, lines: list[dict[str, Any]], at: int) -> None:
    body = b"\n".join(orjson.dumps(line) for line in lines)
    Ingest(store, ref_protector(store.engine, Config()), Config()).body("test", body, at)


def _new_run(store: Store, now: int) -> None:
    """A new run of the thread starts at `now` (after any cut)."""
    new = {"type": "RUN_STARTED", "threadId": THREAD, "runId": "run-new", "timestamp": now}
    _ingest(store, [new], now)


def _states(store: Store) -> dict[str, tuple[str, int]]:
    with store.engine.connect() as c:
        rows = c.execute(text("SELECT request_id, state, since FROM wait_state")).all()
    return {str(r[0]): (str(r[1]), int(r[2])) for r in rows}


def _whole(store: Store, now: int, policy: Policy | None = None) -> dict[str, tuple[str, int]]:
    """(state, since) of every wait of the thread evaluated whole at `now`."""
    (facts,) = store.threads([THREAD])
    out = {}
    for w in evaluate(facts, lambda a, r: policy or QUIET, now).waits:
        assert w.verdict is not None
        out[w.evidence.request_id] = (w.verdict.state.value, w.verdict.since)
    return out


def _checkpoints(store: Store) -> int:
    with store.engine.connect() as c:
        return int(c.execute(text("SELECT count(*) FROM thread_checkpoint")).scalar_one())


def _drop_checkpoints(store: Store) -> None:
    """Every checkpoint deleted: what is read next evaluates the thread whole."""
    with store.engine.begin() as c:
        c.execute(text("DELETE FROM thread_checkpoint"))


def _long(db_url: str, monkeypatch: pytest.MonkeyPatch, lines: list[Any]) -> Iterator[Store]:
    """A store holding `lines` (ingested at START), whose thread is a long one."""
    monkeypatch.setattr(evaluation, "LONG", 50)  # facts: this thread is a long one
    store = Store(open_store(db_url))
    _ingest(store, lines, START)
    yield store
    store.engine.dispose()


def _runs(count: int = RUNS, run: Callable[[int], list[dict[str, Any]]] = _run) -> list[Any]:
    return [line for i in range(1, count + 1) for line in run(i)]


@pytest.fixture
def long_thread(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    yield from _long(db_url, monkeypatch, _runs())


def _whole_loads(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    calls: list[list[str]] = []
    real = evaluation.load_threads

    def spy(conn: Any, ids: Any) -> Any:
        calls.append(list(ids))
        return real(conn, ids)

    monkeypatch.setattr(evaluation, "load_threads", spy)
    return calls


def test_a_tick_after_a_new_event_reads_only_the_suffix_and_gives_the_whole_verdicts(
    long_thread: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = long_thread
    now = START + 100_000
    # The cut is the run of the last wait: all before are settled.
    auditor = _cut_at_last_run(store, QUIET, now)
    loads = _whole_loads(monkeypatch)

    _new_run(store, now)
    report = auditor.tick(now + 600_000)

    assert [] == loads  # from the checkpoint: the history is not read
    assert 1 == report.waits  # the open wait only
    assert _whole(store, now + 600_000) == _states(store)


def test_a_fact_timed_before_the_cut_arriving_later_makes_the_thread_evaluated_whole(
    long_thread: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = long_thread
    now = START + 100_000
    auditor = Auditor(store, (QUIET,))
    auditor.tick(now)
    loads = _whole_loads(monkeypatch)
    before = _states(store)

    # run-31 (it approved approve-30) failed after all: approve-30 is stuck, not resumed.
    late = {
        "type": "RUN_ERROR",
        "threadId": THREAD,
        "runId": "run-31",
        "message": "boom",
        "timestamp": START + 31 * 1000 + 5,
    }
    _ingest(store, [late], now)
    auditor.tick(now + 600_000)

    assert [[THREAD]] == loads
    after = _states(store)
    assert after == _whole(store, now + 600_000)
    rid = f"{THREAD}/approve-30"
    assert before[rid][0] == "RESUMED" and after[rid][0] != "RESUMED"


def test_new_policies_drop_the_checkpoints(long_thread: Store) -> None:
    store = long_thread
    Auditor(store, (QUIET,)).tick(START + 100_000)
    assert 1 == _checkpoints(store)

    Auditor(store, (replace(QUIET, require_acknowledgement=True),))

    assert 0 == _checkpoints(store)


def test_get_of_a_wait_gives_from_the_checkpoint_what_the_whole_thread_gives(
    long_thread: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = long_thread
    auditor = Auditor(store, (QUIET,))
    auditor.tick(START + 100_000)
    last, settled = f"{THREAD}/approve-{RUNS}", f"{THREAD}/approve-20"
    loads = _whole_loads(monkeypatch)
    resumed = {
        rid: Read(store, auditor.policy_for).wait(rid, START + 100_000) for rid in (last, settled)
    }
    assert [] == loads  # the settled wait before the cut: its stored body (settled_wait)
    _drop_checkpoints(store)

    whole = {
        rid: Read(store, auditor.policy_for).wait(rid, START + 100_000) for rid in (last, settled)
    }

    for body in (*resumed.values(), *whole.values()):
        assert body is not None
        body.pop("evaluatedAt")
    assert whole == resumed
    assert resumed[last] is not None and resumed[last]["state"] == "WAITING"


def test_a_short_thread_keeps_no_checkpoint(db_url: str) -> None:
    store = Store(open_store(db_url))  # 60 runs: under LONG facts
    _ingest(store, _runs(), START)
    Auditor(store, (QUIET,)).tick(START + 100_000)
    assert 0 == _checkpoints(store)
    store.engine.dispose()


def test_a_subagent_of_a_wait_after_the_cut_is_in_its_evidence_from_the_checkpoint(
    long_thread: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = long_thread
    auditor = Auditor(store, (QUIET,))
    now = START + 100_000
    auditor.tick(now)
    run, at = "run-sub", now + 1000
    _ingest(
        store,
        [
            {"type": "RUN_STARTED", "threadId": THREAD, "runId": run, "timestamp": at},
            {"type": "SUBAGENT_STARTED", "subagentRunId": "sub-1", "name": "ops", "timestamp": at},
            {
                "type": "RUN_FINISHED",
                "threadId": THREAD,
                "runId": run,
                "timestamp": at + 2,
                "outcome": {
                    "type": "interrupt",
                    "interrupts": [
                        {"id": "ask-sub", "reason": "confirm", "subagentRunId": "sub-1"}
                    ],
                },
            },
        ],
        at,
    )
    loads = _whole_loads(monkeypatch)
    auditor.tick(at + 10_000)
    rid = f"{THREAD}/ask-sub"

    from_cut = Read(store, auditor.policy_for).wait(rid, at + 10_000)
    assert [] == loads  # the tick and the GET read the suffix only
    _drop_checkpoints(store)
    whole = Read(store, auditor.policy_for).wait(rid, at + 10_000)

    assert from_cut is not None and whole is not None
    assert ("sub-1", "ops") == (
        from_cut["evidence"]["subagent"]["runId"],
        from_cut["evidence"]["subagent"]["name"],
    )
    from_cut.pop("evaluatedAt")
    whole.pop("evaluatedAt")
    assert whole == from_cut


def _states_read(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The requestIds of every recorded verdict the auditor reads (whichever way)."""
    read: list[str] = []
    for name in ("records", "records_of"):
        real = getattr(AuditState, name, None)
        if real is None:
            continue

        def spy(self: AuditState, ids: Any, real: Any = real) -> Any:
            out = real(self, ids)
            read.extend(rid for _, rid in out)
            return out

        monkeypatch.setattr(AuditState, name, spy)
    return read


def _rows(store: Store) -> dict[str, tuple[Any, ...]]:
    with store.engine.connect() as c:
        return {str(r[1]): tuple(r) for r in c.execute(text("SELECT * FROM wait_state")).all()}


def test_a_tick_reads_the_recorded_verdicts_of_the_suffix_waits_only_whatever_the_age(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(evaluation, "LONG", 50)
    store = Store(open_store(db_url))
    ages = {"young": RUNS, "old": 5 * RUNS}  # 6 and 30 waits, every one but the last settled
    for thread, runs in ages.items():
        lines = [{**line, "threadId": thread} for line in _runs(runs)]
        _ingest(store, lines, START)
    now = START + 1_000_000
    auditor = Auditor(store, (QUIET,))
    auditor.tick(now)
    before = _rows(store)
    read = _states_read(monkeypatch)

    for thread in ages:
        new = {"type": "RUN_STARTED", "threadId": thread, "runId": "run-new", "timestamp": now}
        _ingest(store, [new], now)
    auditor.tick(now + 600_000)

    last = {f"{thread}/approve-{runs}" for thread, runs in ages.items()}
    assert last == set(read) and 2 == len(read)  # not one per settled wait
    after = _rows(store)
    assert before.keys() == after.keys()
    # The settled waits before the cut are left as they were, evaluation time included.
    assert {r: v for r, v in before.items() if r not in last} == {
        r: v for r, v in after.items() if r not in last
    }
    assert all(before[r] != after[r] for r in last)  # evaluated again
    store.engine.dispose()


def _listed(store: Store, policy: Any, states: set[str], limit: int, now: int) -> list[Any]:
    return Read(store, policy).waits(states, limit, now)["waits"]


def test_the_list_of_open_waits_reads_a_changed_long_thread_from_its_checkpoint(
    long_thread: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = long_thread
    now = START + 100_000
    auditor = Auditor(store, (QUIET,))
    auditor.tick(now)
    _new_run(store, now)  # the thread is dirty: every wait of it is a candidate
    loads = _whole_loads(monkeypatch)
    real = repo.load_threads  # and the read of whole threads of Store.threads
    monkeypatch.setattr(
        repo, "load_threads", lambda c, ids: loads.append(list(ids)) or real(c, ids)
    )

    resumed = _listed(store, auditor.policy_for, {"WAITING"}, 100, now + 1000)
    assert [] == loads  # the settled waits are neither read nor evaluated
    _drop_checkpoints(store)
    whole = _listed(store, auditor.policy_for, {"WAITING"}, 100, now + 1000)

    assert [f"{THREAD}/approve-{RUNS}"] == [w["requestId"] for w in resumed]
    assert whole == resumed


def test_the_list_of_every_state_from_a_checkpoint_is_the_whole_threads_list(
    long_thread: Store,
) -> None:
    # `other` asked long before: the record of its wait is the first chosen, and its decline
    # moves it after every wait of the long thread, whose settled waits before the cut then
    # rank first although none of them was chosen from the records.
    store = long_thread
    now = START + 100_000
    outcome = {"type": "interrupt", "interrupts": [{"id": "ask", "reason": "confirm"}]}
    asked = START - 100_000
    _ingest(
        store,
        [
            {"type": "RUN_STARTED", "threadId": "other", "runId": "o-1", "timestamp": asked},
            {
                "type": "RUN_FINISHED",
                "threadId": "other",
                "runId": "o-1",
                "outcome": outcome,
                "timestamp": asked + 1,
            },
        ],
        now,
    )
    auditor = Auditor(store, (QUIET,))
    auditor.tick(now)
    decline = [{"interruptId": "ask", "status": "resolved", "payload": "reject"}]
    later = now + 1000
    _ingest(
        store,
        [
            {
                "threadId": "other",
                "runId": "o-2",
                "messages": [],
                "resume": decline,
                "timestamp": later,
            },
            {"type": "RUN_STARTED", "threadId": "other", "runId": "o-2", "timestamp": later},
            {"type": "RUN_STARTED", "threadId": THREAD, "runId": "run-new", "timestamp": later},
        ],
        later,
    )
    every = {"WAITING", "RESUMED", "CLOSED_BY_DECLINE", "CANCELLED", "STUCK_AFTER_DECISION"}
    limits = (1, 2, 3, 100)

    resumed = [_listed(store, auditor.policy_for, every, n, later + 1000) for n in limits]
    _drop_checkpoints(store)
    whole = [_listed(store, auditor.policy_for, every, n, later + 1000) for n in limits]

    assert f"{THREAD}/approve-10" == resumed[0][0]["requestId"]
    assert whole == resumed
    assert RUNS // 10 + 1 == len(resumed[-1])


def _vm_steps(store: Store, asking: Callable[[str], bool]) -> list[int]:
    """SQLite's VM steps of the statements `asking` picks, from now on: `[steps]`, which the
    caller resets to 0 before what it measures."""
    steps, on = [0], [False]

    def count() -> int:
        steps[0] += on[0]
        return 0

    event.listen(store.engine, "checkout", lambda dbapi, *_: dbapi.set_progress_handler(count, 1))

    @event.listens_for(store.engine, "before_cursor_execute")
    def before(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        on[0] = asking(statement)

    return steps


def _crew_run(i: int) -> list[dict[str, Any]]:
    """Run i of a CrewAI-like thread: its interrupt id is the thread's id, for every wait,
    and every run calls a tool under one scripted id (ungated), with its result."""
    lines = [
        {**line, "resume": [{**r, "interruptId": THREAD} for r in line["resume"]]}
        if "resume" in line
        else line
        for line in _run(i)
    ]
    end = lines.pop()
    if "outcome" in end:
        end["outcome"]["interrupts"][0]["id"] = THREAD
    call, at = {"toolCallId": "scripted-1", "timestamp": end["timestamp"] - 1}, end["timestamp"]
    return [
        *lines,
        {"type": "TOOL_CALL_START", "toolCallName": "lookup", **call},
        {"type": "TOOL_CALL_END", **call},
        {"type": "TOOL_CALL_RESULT", "messageId": f"m-{i}", "content": "ok", **call},
        {**end, "timestamp": at},
    ]


@pytest.fixture
def crew_thread(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    yield from _long(db_url, monkeypatch, _runs(run=_crew_run))


def test_a_thread_reusing_one_interrupt_id_and_scripted_call_ids_resumes_from_its_cut(
    crew_thread: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = crew_thread
    now = START + 100_000
    auditor = _cut_at_last_run(store, QUIET, now)
    loads = _whole_loads(monkeypatch)
    _new_run(store, now)
    auditor.tick(now + 600_000)
    last = f"{THREAD}/{THREAD}@run-{RUNS}"  # the id was used before: `@run`
    from_cut = Read(store, auditor.policy_for).wait(last, now + 600_000)

    assert [] == loads  # the tick and the GET read the suffix only
    assert _whole(store, now + 600_000) == _states(store)
    assert "WAITING" == _states(store)[last][0]
    _drop_checkpoints(store)
    whole = Read(store, auditor.policy_for).wait(last, now + 600_000)
    assert from_cut is not None and whole is not None
    from_cut.pop("evaluatedAt")
    whole.pop("evaluatedAt")
    assert whole == from_cut


def _counts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = suffix._prefix_count

    def spy(conn: Any, cp: Any) -> int:
        calls.append(cp.thread_id)
        return real(conn, cp)

    monkeypatch.setattr(suffix, "_prefix_count", spy)
    return calls


# Heartbeats matter: a wait waits on a fresh heartbeat and a resume handle.
BEATING = replace(QUIET, handle=Need.REQUIRED, heartbeat=Need.REQUIRED)


def _thread_beat(at: int, handle: str | None = "ckpt") -> dict[str, Any]:
    """A heartbeat of the thread (no run): for every wait of it, earlier or later."""
    value = {"threadId": THREAD, "resumeHandle": handle}
    return {"type": "CUSTOM", "name": "sidewatch.heartbeat", "value": value, "timestamp": at}


def _beats_whole(store: Store, now: int) -> dict[str, Any]:
    (facts,) = store.threads([THREAD])
    return {
        w.evidence.request_id: (w.evidence.items, w.verdict)
        for w in evaluate(facts, lambda a, r: BEATING, now).waits
    }


@pytest.fixture
def beating_thread(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    """The long thread, beating thread-wide (spans: a row a beat here, no compaction gap)
    after every wait's approval, the last beat after the last wait."""
    beats = [_thread_beat(START + i * 1000 + 500) for i in range(5, RUNS + 1, 10)]
    yield from _long(db_url, monkeypatch, [*_runs(), *beats])


def test_a_thread_beating_thread_wide_resumes_from_its_cut_with_the_beats_before_it(
    beating_thread: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = beating_thread
    now = START + 100_000
    # Thread-wide beats before it keep no cut from holding.
    auditor = _cut_at_last_run(store, BEATING, now)
    loads = _whole_loads(monkeypatch)

    # A new beat, after the cut: the last wait is fresh again.
    _ingest(store, [_thread_beat(now + 500_000)], now + 500_000)
    report = auditor.tick(now + 600_000)

    assert [] == loads  # from the checkpoint: the history is not read
    assert 1 == report.waits  # the open wait only
    whole = _beats_whole(store, now + 600_000)
    last = f"{THREAD}/approve-{RUNS}"
    body = Read(store, auditor.policy_for).wait(last, now + 600_000)
    assert [] == loads  # the GET of the last wait from the checkpoint too
    assert body is not None and body["state"] == whole[last][1].state.value == "WAITING"
    # Its timeline holds every beat of the thread before it, as the whole thread gives it.
    beats = [i for i in whole[last][0] if type(i).__name__ == "Heartbeat"]
    assert len(beats) == len(range(5, RUNS + 1, 10)) + 1
    assert {r: (v.state.value, v.since) for r, (_, v) in whole.items()} == _states(store)
    _drop_checkpoints(store)
    again = Read(store, auditor.policy_for).wait(last, now + 600_000)
    assert [[THREAD]] == loads  # evaluated whole: the same body, timeline and all
    assert again is not None and sum(i["kind"] == "heartbeat" for i in again["timeline"]) == 7
    assert again == body


def _service(at: int, **thread: str) -> dict[str, Any]:
    """A beat of instance A of the service `billing` (durable); with `threadId` (and
    `runId`), it binds that thread's waits (of that run) to the service."""
    value = {**thread, "service": "billing", "instance": "A", "durable": True}
    return {"type": "CUSTOM", "name": "sidewatch.heartbeat", "value": value, "timestamp": at}


@pytest.fixture
def bound_thread(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    """The long thread, bound to the service `billing` from its start (no run: every wait)."""
    lines = [_service(START - 1, threadId=THREAD), *_runs(), _service(START + 30_000)]
    yield from _long(db_url, monkeypatch, lines)


def test_a_thread_bound_to_a_service_resumes_from_its_cut_with_the_service_s_beats(
    bound_thread: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = bound_thread
    now = START + 100_000
    auditor = _cut_at_last_run(store, BEATING, now)
    loads = _whole_loads(monkeypatch)

    new = {"type": "RUN_STARTED", "threadId": THREAD, "runId": "run-new", "timestamp": now}
    _ingest(store, [new, _service(now + 500_000)], now)
    auditor.tick(now + 600_000)
    last = f"{THREAD}/approve-{RUNS}"
    body = Read(store, auditor.policy_for).wait(last, now + 600_000)

    assert [] == loads  # the tick and the GET from the checkpoint
    whole = _beats_whole(store, now + 600_000)
    assert {r: (v.state.value, v.since) for r, (_, v) in whole.items()} == _states(store)
    _drop_checkpoints(store)
    again = Read(store, auditor.policy_for).wait(last, now + 600_000)
    assert again is not None and again["state"] == "WAITING"  # kept fresh by the service
    assert again == body


@pytest.fixture
def run_bound_thread(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    """The long thread, its last wait's run bound to the service `billing` by an event timed
    before that run's start (so before the thread's cut), and a settled wait's run bound to
    it too, after the cut."""
    lines = _runs()
    lines.append(_service(START + RUNS * 1000 - 1, threadId=THREAD, runId=f"run-{RUNS}"))
    lines.append(_service(START + 90_000, threadId=THREAD, runId="run-30"))
    yield from _long(db_url, monkeypatch, [*lines, _service(START + 95_000)])


def test_a_thread_with_a_service_bound_to_one_of_its_runs_resumes_from_its_cut(
    run_bound_thread: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = run_bound_thread
    now, later = START + 100_000, START + 700_000
    auditor = _cut_at_last_run(store, BEATING, now)
    loads = _whole_loads(monkeypatch)

    new = {"type": "RUN_STARTED", "threadId": THREAD, "runId": "run-new", "timestamp": now}
    # A new beat of the service, and a binding of a settled wait's run, timed after the cut.
    again = _service(now + 1, threadId=THREAD, runId="run-20")
    _ingest(store, [new, again, _service(later - 100_000)], now)
    auditor.tick(later)
    last = f"{THREAD}/approve-{RUNS}"
    body = Read(store, auditor.policy_for).wait(last, later)
    with store.engine.connect() as c:
        (out,) = evaluation.evaluate_threads(c, [THREAD], auditor.policy_for, later, keep=False)

    assert [] == loads  # the tick, the GET and the evaluation from the checkpoint
    whole = _beats_whole(store, later)
    assert {r: (v.state.value, v.since) for r, (_, v) in whole.items()} == _states(store)
    # Resumed: the suffix's one wait, as the whole thread gives it, its run's beats and all
    # (the binding before the cut, the service's first beat and its latest).
    assert out.resumed and out.result is not None
    (w,) = out.result.waits
    assert (w.evidence.request_id, w.evidence.items, w.verdict) == (last, *whole[last])
    beats = [i for i in w.evidence.items if type(i).__name__ == "Heartbeat"]
    assert [b.at for b in beats] == [START + RUNS * 1000 - 1, START + 95_000, later - 100_000]
    assert w.verdict is not None and w.verdict.state.value == "WAITING"  # fresh: the service
    _drop_checkpoints(store)
    assert Read(store, auditor.policy_for).wait(last, later) == body
    assert [[THREAD]] == loads  # evaluated whole: the same body


def _cut_at_last_run(store: Store, policy: Policy, now: int) -> Auditor:
    """A first tick at `now`, which cuts the thread at the run of its last wait (every wait
    before it settled); the auditor, to tick again."""
    auditor = Auditor(store, (policy,))
    auditor.tick(now)
    with store.engine.connect() as c:
        (cut,) = c.execute(text("SELECT cut FROM thread_checkpoint")).one()
    assert cut == START + RUNS * 1000
    return auditor


def _stayed_mark(store: Store, now: int) -> None:
    # A mark that stayed (a unit came during the tick that took the checkpoint), its time
    # that of a fact the checkpoint's evaluation had.
    with store.engine.begin() as c:
        c.execute(
            text("INSERT INTO dirty_thread (thread_id, mark, early) VALUES (:t, 7, :at)"),
            {"t": THREAD, "at": START},
        )


def _late_thread_beat(store: Store, now: int) -> None:
    _ingest(store, [_thread_beat(START + 1, handle=None)], now)  # a late one: handle gone


@pytest.mark.parametrize(
    ("thread", "policy", "change", "counted"),
    [
        # The dirty mark's time is after the cut: none late, the prefix is not counted.
        ("long_thread", QUIET, _new_run, False),
        # Counted: the same prefix, resumed.
        ("long_thread", QUIET, _stayed_mark, True),
        # Counted (the mark is before the cut); its count has no thread-wide beat.
        ("beating_thread", BEATING, _late_thread_beat, True),
    ],
    ids=["new-event-not-counted", "mark-of-facts-evaluated-counted", "late-thread-beat-kept"],
)
def test_the_prefix_is_counted_only_after_a_mark_before_the_cut_and_the_checkpoint_holds(
    thread: str,
    policy: Policy,
    change: Callable[[Store, int], None],
    counted: bool,
    db_url: str,  # the stores the thread's fixture is made in, each
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store: Store = request.getfixturevalue(thread)
    now = START + 100_000
    auditor = Auditor(store, (policy,))
    auditor.tick(now)
    counts, loads = _counts(monkeypatch), _whole_loads(monkeypatch)
    change(store, now)
    auditor.tick(now + 600_000)

    assert ([THREAD] if counted else [], []) == (counts, loads)
    assert _whole(store, now + 600_000, policy) == _states(store)


def _answer_reused_id(store: Store, now: int) -> None:
    # A run after the cut answers the thread's id before the run after the cut asks with it
    # (arriving late): the latest wait with that id is then a settled one, before the cut.
    run, at = "run-again", START + RUNS * 1000 + 1
    again = [
        {
            "threadId": THREAD,
            "runId": run,
            "messages": [],
            "resume": [{"interruptId": THREAD, "status": "cancelled", "payload": {}}],
            "timestamp": at,
        },
        {"type": "RUN_STARTED", "threadId": THREAD, "runId": run, "timestamp": at},
        {"type": "RUN_FINISHED", "threadId": THREAD, "runId": run, "timestamp": at},
    ]
    _ingest(store, again, at)


def _route_settled_wait(store: Store, now: int) -> None:
    route = {
        "type": "CUSTOM",
        "name": "sidewatch.route",
        "value": {"requestId": f"{THREAD}/approve-20", "delivered": True, "approverRef": "ops"},
        "timestamp": now,
    }
    _ingest(store, [route], now)  # timed after the cut, about a wait before it


@pytest.mark.parametrize(
    ("thread", "change"),
    [("crew_thread", _answer_reused_id), ("long_thread", _route_settled_wait)],
    ids=["answer-naming-the-reused-interrupt-id", "signal-naming-a-settled-wait"],
)
def test_a_fact_after_the_cut_about_a_wait_before_it_makes_the_thread_evaluated_whole(
    thread: str,
    change: Callable[[Store, int], None],
    db_url: str,  # the stores the thread's fixture is made in, each
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store: Store = request.getfixturevalue(thread)
    now = START + 100_000
    auditor = Auditor(store, (QUIET,))
    auditor.tick(now)
    assert 1 == _checkpoints(store)
    loads = _whole_loads(monkeypatch)
    change(store, now)
    auditor.tick(now + 600_000)

    assert [[THREAD]] == loads
    assert _whole(store, now + 600_000) == _states(store)


def _bindings(thread: str, runs: int) -> list[dict[str, Any]]:
    """Each wait's run bound to the service (a binding a wait), and a beat of it."""
    binds = [
        _service(START + i * 1000 + 1, threadId=thread, runId=f"run-{i}")
        for i in range(10, runs + 1, 10)
    ]
    return [*binds, _service(START + 11 * RUNS * 1000)]


@pytest.mark.parametrize(
    ("policy", "bound", "asking"),
    [
        # The statement asking which of the suffix's ids the prefix holds (store.suffix.seen):
        # the ids asked, in one statement.
        (QUIET, False, lambda statement: statement.startswith("SELECT 'r'")),
        # The statements reading service bindings, each wait's run bound to the service.
        (BEATING, True, lambda statement: "FROM service_binding" in statement),
    ],
    ids=["the-prefix-s-ids", "the-bindings-of-the-suffix-s-runs"],
)
def test_what_a_get_from_the_checkpoint_asks_is_looked_up_not_read_by_age(
    policy: Policy,
    bound: bool,
    asking: Callable[[str], bool],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # SQLite's VM steps of the statements `asking` picks, for the GET of the open wait of a
    # thread at two ages.
    monkeypatch.setattr(evaluation, "LONG", 50)
    store = Store(open_store(f"sqlite:///{tmp_path / 's.db'}"))
    ages = {"young": RUNS, "old": 10 * RUNS}
    for thread, runs in ages.items():
        lines = [{**line, "threadId": thread} for line in _runs(runs)]
        _ingest(store, [*lines, *(_bindings(thread, runs) if bound else ())], START)
    now = START + 1_000_000
    auditor = Auditor(store, (policy,))
    auditor.tick(now)
    steps = _vm_steps(store, asking)

    def asked(thread: str) -> int:
        steps[0] = 0
        body = Read(store, auditor.policy_for).wait(f"{thread}/approve-{ages[thread]}", now)
        assert body is not None and "WAITING" == body["state"]  # bound: fresh, its service
        return steps[0]

    loads = _whole_loads(monkeypatch)
    young, old = asked("young"), asked("old")
    store.engine.dispose()

    assert [] == loads  # both from their checkpoints
    assert 0 < old <= young * 1.2 + 50, (young, old)
