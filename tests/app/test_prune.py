"""`store.retention` on SQLite and PostgreSQL: threads whose waits all closed before the cutoff
go with their facts, open waits stay whatever their age (their facts and verdicts identical),
old units and evidence naming no wait go, and every counter continues past the pruning."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from sqlalchemy import Engine, event, text

from sidewatch.app.audit import Auditor
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.app.prune import Retention
from sidewatch.app.report import report
from sidewatch.config import Config
from sidewatch.core.engine import evaluate
from sidewatch.exporters.snapshot import DECISION_BUCKETS, RESUME_BUCKETS
from sidewatch.report.markdown import render_markdown
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store
from sidewatch.store.transitions import count_moves
from tests.app.test_auditor import counters

DAY = 86_400_000
MIN = 60_000
HOUR = 3_600_000
SEC = 1000
T0 = 1_785_081_600_000  # 2026-07-26T16:00:00Z
WEEK = 7 * DAY
POLICIES = Config().policies


def ingest(store: Store, lines: list[dict[str, Any]], received_at: int, bad: int = 0) -> None:
    body = b"\n".join([*(orjson.dumps(line) for line in lines), *([b"{not json"] * bad)])
    Ingest(store, ref_protector(store.engine, Config()), Config()).body("test", body, received_at)


def asked(thread: str, at: int, run: str = "r1", interrupt: str = "i") -> list[dict[str, Any]]:
    outcome = {
        "type": "interrupt",
        "interrupts": [
            {"id": interrupt, "reason": "tool_call", "metadata": {"resumeHandle": f"ckpt:{thread}"}}
        ],
    }
    return [
        {"type": "RUN_STARTED", "threadId": thread, "runId": run, "timestamp": at - 10 * SEC},
        {
            "type": "RUN_FINISHED",
            "threadId": thread,
            "runId": run,
            "outcome": outcome,
            "timestamp": at,
        },
        custom("sidewatch.route", at + SEC, threadId=thread, interruptId=interrupt, delivered=True),
    ]


def answered(thread: str, at: int, payload: str) -> list[dict[str, Any]]:
    answer = {"interruptId": "i", "status": "resolved", "payload": payload}
    return [
        {"threadId": thread, "runId": "r2", "messages": [], "timestamp": at, "resume": [answer]},
        {"type": "RUN_STARTED", "threadId": thread, "runId": "r2", "timestamp": at + SEC},
        {"type": "RUN_FINISHED", "threadId": thread, "runId": "r2", "timestamp": at + 2 * SEC},
    ]


def custom(name: str, at: int, **value: Any) -> dict[str, Any]:
    return {"type": "CUSTOM", "name": name, "value": value, "timestamp": at}


def heartbeat(thread: str, at: int) -> dict[str, Any]:
    return custom("sidewatch.heartbeat", at, threadId=thread, resumeHandle=f"ckpt:{thread}")


def history(store: Store, auditor: Auditor) -> None:
    """Day 0: t-resumed and t-declined close, t-open waits for ever (heartbeats on to day 9),
    t-mixed has a wait that closes and one that stays open, a heartbeat of t-ghost and a route
    for nobody/i name no wait; a line is rejected. Day 9: t-young closes, t-g2 beats once."""
    ingest(
        store,
        [
            *asked("t-resumed", T0),
            *answered("t-resumed", T0 + MIN, "approve"),
            *asked("t-declined", T0),
            *answered("t-declined", T0 + MIN, "reject"),
            *asked("t-open", T0),
            *asked("t-mixed", T0),
            *answered("t-mixed", T0 + MIN, "approve"),
            *asked("t-mixed", T0 + 2 * MIN, "r3", "j"),
            heartbeat("t-ghost", T0),
            custom("sidewatch.route", T0, requestId="nobody/i", delivered=True),
        ],
        T0 + 2 * MIN,
        bad=1,
    )
    auditor.tick(T0 + 3 * MIN)
    for day in range(1, 10):
        beats = [heartbeat("t-open", T0 + day * DAY), heartbeat("t-mixed", T0 + day * DAY)]
        ingest(store, beats, T0 + day * DAY)
        auditor.tick(T0 + day * DAY + MIN)
    at = T0 + 9 * DAY
    ingest(
        store,
        [*asked("t-young", at), *answered("t-young", at + MIN, "approve"), heartbeat("t-g2", at)],
        at + 2 * MIN,
        bad=1,
    )
    auditor.tick(at + 3 * MIN)


def table_rows(engine: Engine, table: str, column: str = "thread_id") -> list[Any]:
    with engine.connect() as c:
        return sorted(r[0] for r in c.execute(text(f"SELECT {column} FROM {table}")))


NOW = T0 + 10 * DAY


def test_closed_threads_older_than_the_retention_go_with_every_fact_of_them(
    open_stores: Callable[[], Store],
) -> None:
    store = open_stores()
    auditor = Auditor(store, POLICIES)
    history(store, auditor)

    pruned = Retention(store.engine, WEEK, batch=1).prune(NOW, budget_s=60)

    assert (2, 2, True) == (pruned.threads, pruned.waits, pruned.done)
    assert ["t-mixed", "t-mixed", "t-open", "t-young"] == table_rows(store.engine, "wait_state")
    kept = {"t-mixed", "t-open", "t-young"}
    assert kept == set(table_rows(store.engine, "interrupt"))
    for table in ("run_fact", "answer", "tool_result", "transition"):
        assert kept >= set(table_rows(store.engine, table)), table
    assert ["t-mixed", "t-young"] == sorted(set(table_rows(store.engine, "answer")))


def test_an_open_wait_older_than_the_retention_keeps_its_facts_and_its_verdict(
    open_stores: Callable[[], Store],
) -> None:
    store = open_stores()
    auditor = Auditor(store, POLICIES)
    history(store, auditor)
    threads = ["t-mixed", "t-open"]
    facts = store.threads(threads)
    records = auditor.state.records(threads)

    Retention(store.engine, WEEK, batch=1).prune(NOW, budget_s=60)
    auditor.tick(NOW)

    assert facts == store.threads(threads)
    assert records.keys() == auditor.state.records(threads).keys()
    for later in (NOW, NOW + DAY, NOW + 30 * DAY):
        for old, new in zip(facts, store.threads(threads), strict=True):
            before = [w.verdict for w in evaluate(old, auditor.policy_for, later).waits]
            after = [w.verdict for w in evaluate(new, auditor.policy_for, later).waits]
            assert before == after


def test_every_counter_a_restart_continues_is_the_same_after_pruning(
    open_stores: Callable[[], Store],
) -> None:
    store = open_stores()
    auditor = Auditor(store, POLICIES)
    history(store, auditor)
    auditor.tick(NOW)
    before = counters(Auditor(open_stores(), POLICIES).snapshot)
    ingested = auditor.state.ingest_totals()

    buckets = {"decision": DECISION_BUCKETS, "resume": RESUME_BUCKETS}
    Retention(store.engine, WEEK, buckets).prune(NOW, budget_s=60)
    restarted = Auditor(open_stores(), POLICIES)

    assert 3 == before["closed_total"][("RESUMED", "default")]
    assert before == counters(restarted.snapshot)
    assert ingested == restarted.state.ingest_totals()


def test_every_counter_a_restart_continues_is_the_same_after_pruning_inside_threads(
    open_stores: Callable[[], Store],
) -> None:
    store = open_stores()
    auditor = Auditor(store, POLICIES)
    kept_history(store, auditor)
    auditor.tick(NOW)
    before = counters(Auditor(open_stores(), POLICIES).snapshot)

    buckets = {"decision": DECISION_BUCKETS, "resume": RESUME_BUCKETS}
    pruned = Retention(store.engine, WEEK, buckets, policy_for=auditor.policy_for).prune(NOW, 60)
    restarted = Auditor(open_stores(), POLICIES)

    assert (0, 3) == (pruned.threads, pruned.waits)
    assert 3 == before["closed_total"][("RESUMED", "default")]
    assert before == counters(restarted.snapshot)


def test_old_units_and_their_rejects_go_and_their_lines_stay_counted(
    open_stores: Callable[[], Store],
) -> None:
    store = open_stores()
    history(store, Auditor(store, POLICIES))
    counted = Auditor(store, POLICIES).state.ingest_totals()

    pruned = Retention(store.engine, WEEK, batch=2).prune(NOW, budget_s=60)

    # received on days 0, 1 and 2 (before the cutoff, day 3); the rejected line of day 0
    assert 3 == pruned.units
    kept = [T0 + day * DAY for day in range(3, 10)] + [T0 + 9 * DAY + 2 * MIN]
    assert kept == table_rows(store.engine, "unit", "received_at")
    assert 1 == len(table_rows(store.engine, "reject", "unit_id"))
    assert counted == Auditor(store, POLICIES).state.ingest_totals()
    assert 2 == counted[1]["not_json"]


def test_evidence_naming_no_wait_goes_after_the_retention_and_is_counted(
    open_stores: Callable[[], Store],
) -> None:
    store = open_stores()
    history(store, Auditor(store, POLICIES))

    pruned = Retention(store.engine, WEEK, batch=1).prune(NOW, budget_s=60)

    assert ["t-g2", "t-mixed", "t-open"] == sorted(set(table_rows(store.engine, "heartbeat")))
    assert "nobody/i" not in table_rows(store.engine, "signal", "coalesce(request_id, '')")
    assert 2 == pruned.unknown
    with store.engine.connect() as c:
        counted = dict(
            c.execute(
                text("SELECT key, value FROM pruned_total WHERE counter = 'unknown_evidence'")
            ).all()
        )
    assert {"heartbeat": 1, "signal": 1} == counted


def test_a_thread_with_evidence_the_auditor_has_not_seen_is_not_pruned(
    open_stores: Callable[[], Store],
) -> None:
    store = open_stores()
    history(store, Auditor(store, POLICIES))
    ingest(store, [heartbeat("t-resumed", NOW - MIN)], NOW - MIN)  # marks it dirty

    pruned = Retention(store.engine, WEEK).prune(NOW, budget_s=60)

    assert 1 == pruned.threads  # t-declined only
    assert "t-resumed" in table_rows(store.engine, "wait_state")


def test_a_pass_out_of_time_stops_between_batches_and_the_next_goes_on(
    open_stores: Callable[[], Store],
) -> None:
    store = open_stores()
    history(store, Auditor(store, POLICIES))
    retention = Retention(store.engine, WEEK, batch=1)
    ticks = iter(range(100))

    first = retention.prune(NOW, budget_s=1.5, clock=lambda: float(next(ticks)))
    second = retention.prune(NOW, budget_s=60)

    # One batch of one closing transition, then out of time. Which thread's closing comes
    # first follows the order the verdicts were written in: it may be t-mixed's (kept, its
    # thread holds an open wait), so the first pass prunes one thread or none.
    assert (False, True) == (first.done, second.done)
    assert first.threads <= 1
    assert 2 == first.threads + second.threads


def test_a_report_reaching_back_before_the_cutoff_says_what_was_pruned(
    open_stores: Callable[[], Store],
) -> None:
    store = open_stores()
    history(store, Auditor(store, POLICIES))
    lines, moves = sum(table_rows(store.engine, "line_count", "lines")), _moves(store.engine)
    Retention(store.engine, WEEK).prune(NOW, budget_s=60)
    lines -= sum(table_rows(store.engine, "line_count", "lines"))
    moved = moves - _moves(store.engine)

    old = report(store, POLICIES, T0 + DAY, DAY)
    recent = report(store, POLICIES, NOW, DAY)
    text = render_markdown(old)

    assert {
        "prunedBefore": "2026-07-29T16:00:00Z",
        "windowPruned": True,
        "pruned": {"lines": lines, "rejects": 1, "transitions": moved},
        "unknownWaitEvidence": {"kept": {"heartbeat": 1}, "pruned": {"heartbeat": 1, "signal": 1}},
    } == old["retention"]
    assert not recent["retention"]["windowPruned"]
    assert "reaches back before 2026-07-29T16:00:00Z: what is older was pruned" in text
    assert "| heartbeat | 1 | 1 |" in text


def _moves(engine: Engine) -> int:
    """Recorded transitions (a row a recording holds each of its own)."""
    with engine.connect() as conn:
        return sum(count_moves(conn).values())


def held(threads: range, at: int) -> list[dict[str, Any]]:
    """Threads whose first wait closes at once and whose second stays open."""
    lines: list[dict[str, Any]] = []
    for n in threads:
        t = f"t-held-{n}"
        lines += [
            *asked(t, at),
            *answered(t, at + MIN, "approve"),
            *asked(t, at + 2 * MIN, "r3", "j"),
        ]
    return lines


def test_a_pass_reads_what_is_new_not_the_closed_waits_of_threads_that_stay(
    tmp_path: Path,
) -> None:
    # Old closed waits in threads held by an open wait are never pruned without the policies
    # (Retention(policy_for=None)); a pass must not read them again at every tick.
    store = Store(open_store(f"sqlite:///{tmp_path / 's.db'}"))
    auditor = Auditor(store, POLICIES)
    retention = Retention(store.engine, WEEK)
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    event.listen(store.engine, "checkout", lambda dbapi, *_: dbapi.set_progress_handler(count, 1))

    def prune() -> int:
        before = steps[0]
        retention.prune(NOW, budget_s=600)
        return steps[0] - before

    ingest(store, held(range(3), T0), T0 + 3 * MIN)
    auditor.tick(T0 + 4 * MIN)
    prune()
    few = prune()
    ingest(store, held(range(3, 60), T0 + DAY), T0 + DAY + 3 * MIN)
    auditor.tick(T0 + DAY + 4 * MIN)
    prune()
    many = prune()

    assert 60 == len(set(table_rows(store.engine, "wait_state")))
    assert many <= few * 1.2, (few, many)


def test_evidence_of_threads_that_never_interrupt_leaves_no_dirty_mark(
    open_stores: Callable[[], Store],
) -> None:
    store = open_stores()
    auditor = Auditor(store, POLICIES)
    ingest(store, [*asked("t-asked", T0)], T0)
    auditor.tick(T0 + SEC)
    beats = [heartbeat(f"t-quiet-{n}", T0 + MIN) for n in range(50)]
    routes = [
        custom("sidewatch.route", T0 + MIN, threadId=f"t-n-{n}", interruptId="i", delivered=True)
        for n in range(50)
    ]
    ingest(store, [*beats, *routes, heartbeat("t-asked", T0 + MIN)], T0 + MIN)
    early = heartbeat("t-late", T0 + MIN)  # evidence before its wait: classified with it
    ingest(store, [early], T0 + MIN)
    marked = table_rows(store.engine, "dirty_thread")
    ingest(store, asked("t-late", T0 + 2 * MIN), T0 + 2 * MIN)
    auditor.tick(T0 + 3 * MIN)
    late = auditor.state.records(["t-late"])

    assert ["t-asked"] == marked
    assert [] == table_rows(store.engine, "dirty_thread")
    assert 1 == len(late)
    (wait,) = evaluate(store.threads(["t-late"])[0], auditor.policy_for, T0 + 3 * MIN).waits
    assert [T0 + MIN] == [i.at for i in wait.evidence.items if type(i).__name__ == "Heartbeat"]


def answer(thread: str, run: str, interrupt: str, at: int, payload: str) -> list[dict[str, Any]]:
    """Run `run`'s input answering `interrupt`, and the run."""
    resume = [{"interruptId": interrupt, "status": "resolved", "payload": payload}]
    return [
        {"threadId": thread, "runId": run, "messages": [], "timestamp": at, "resume": resume},
        {"type": "RUN_STARTED", "threadId": thread, "runId": run, "timestamp": at + SEC},
        {"type": "RUN_FINISHED", "threadId": thread, "runId": run, "timestamp": at + 2 * SEC},
    ]


def legacy_map(thread: str, run: str, interrupt: str, at: int) -> list[dict[str, Any]]:
    """A `forwardedProps.command.resume` map keyed by `interrupt`, and the run."""
    resume = {interrupt: {"approved": False}}
    props = {"command": {"resume": resume}}
    return [
        {
            "threadId": thread,
            "runId": run,
            "messages": [],
            "timestamp": at,
            "forwardedProps": props,
        },
        {"type": "RUN_STARTED", "threadId": thread, "runId": run, "timestamp": at + SEC},
        {"type": "RUN_FINISHED", "threadId": thread, "runId": run, "timestamp": at + 2 * SEC},
    ]


KEPT = ("t-reuse", "t-legacy", "t-lone")


def kept_history(store: Store, auditor: Auditor) -> None:
    """Day 0: in each of KEPT a wait closes and a second stays open; t-reuse's second reuses
    the first's interrupt id (its requestId is t-reuse/i@r3). Heartbeats and ticks each day
    to day 9."""
    lines: list[dict[str, Any]] = []
    lines += [*asked("t-reuse", T0, "r1", "i"), *answer("t-reuse", "r2", "i", T0 + MIN, "ok")]
    lines += asked("t-reuse", T0 + 2 * MIN, "r3", "i")
    for t in ("t-legacy", "t-lone"):
        lines += [*asked(t, T0, "r1", "a"), *answer(t, "r2", "a", T0 + MIN, "ok")]
        lines += asked(t, T0 + 2 * MIN, "r3", "b")
    ingest(store, lines, T0 + 3 * MIN)
    auditor.tick(T0 + 4 * MIN)
    for day in range(1, 10):
        ingest(store, [heartbeat(t, T0 + day * DAY) for t in KEPT], T0 + day * DAY)
        auditor.tick(T0 + day * DAY + MIN)


def after_pruning(store: Store) -> None:
    """Traffic after the pruning that names what was pruned: r1's announcement delivered
    again, a legacy map keyed by a closed wait's id, a lone answer naming one."""
    at = NOW + MIN
    lines = [*asked("t-reuse", T0, "r1", "i"), *legacy_map("t-legacy", "r7", "a", at)]
    lines += answer("t-lone", "r8", "a", at, "ok")
    ingest(store, lines, at + 3 * SEC)


def verdicts(store: Store, auditor: Auditor, now: int, only_open: bool = False) -> list[Any]:
    """Every wait of KEPT that was not pruned, with its evidence and verdict at `now`."""
    out = []
    for facts in store.threads(list(KEPT)):
        for w in evaluate(facts, auditor.policy_for, now).waits:
            assert w.verdict is not None
            if w.evidence.request_id in PRUNED or (only_open and w.verdict.closed):
                continue
            out.append((w.evidence, w.verdict))
    return out


PRUNED = ("t-reuse/i", "t-legacy/a", "t-lone/a")


def _twin_url(blank_db_url: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A second new store on the same database as `blank_db_url` (its ids and arrival
    sequences are then the same for the same traffic)."""
    if blank_db_url.startswith("sqlite"):
        return f"sqlite:///{tmp_path / 'twin.db'}"
    schemas = request.getfixturevalue("pg_schemas")
    return str(schemas.url(schemas.blank()))


def test_closed_waits_beside_an_open_one_go_and_the_open_verdicts_stay_identical(
    blank_db_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = Store(open_store(blank_db_url))
    auditor = Auditor(store, POLICIES)
    kept_history(store, auditor)
    twin = Store(open_store(_twin_url(blank_db_url, tmp_path, request)))  # never pruned
    twin_auditor = Auditor(twin, POLICIES)
    kept_history(twin, twin_auditor)
    rows = {t: len(table_rows(store.engine, t)) for t in ("run_fact", "answer", "transition")}

    pruned = Retention(store.engine, WEEK, policy_for=auditor.policy_for).prune(NOW, 60)
    opened = [verdicts(store, auditor, t, True) for t in (NOW, NOW + 40 * DAY)]
    twin_opened = [verdicts(twin, twin_auditor, t, True) for t in (NOW, NOW + 40 * DAY)]
    after_pruning(store)
    after_pruning(twin)
    auditor.tick(NOW + HOUR)
    twin_auditor.tick(NOW + HOUR)

    assert 3 == pruned.waits
    assert sorted(["t-legacy/b", "t-lone/b", "t-reuse/i@r3"]) == table_rows(
        store.engine, "wait_state", "request_id"
    )
    assert (3, ["t-lone"]) == (rows["answer"], table_rows(store.engine, "answer"))  # r8's
    assert len(table_rows(store.engine, "transition")) < rows["transition"]
    assert len(table_rows(store.engine, "run_fact")) < rows["run_fact"]
    assert 3 == len(opened[0])
    assert twin_opened == opened
    for later in (NOW + HOUR, NOW + 3 * DAY, NOW + 40 * DAY):
        assert verdicts(twin, twin_auditor, later) == verdicts(store, auditor, later)
    twin_states = twin_auditor.state.records(list(KEPT))
    assert {k: v for k, v in twin_states.items() if k[1] not in PRUNED} == (
        auditor.state.records(list(KEPT))
    )
    twin.engine.dispose()
    store.engine.dispose()


def test_a_pass_with_nothing_recorded_since_the_last_reads_no_transition(
    open_stores: Callable[[], Store],
) -> None:
    store = open_stores()
    auditor = Auditor(store, POLICIES)
    ingest(store, held(range(20), T0), T0 + 3 * MIN)
    auditor.tick(T0 + 4 * MIN)
    retention = Retention(store.engine, WEEK)
    retention.prune(NOW, budget_s=60)

    retention.prune(NOW, budget_s=60)
    idle = retention.examined
    ingest(store, answer("t-held-0", "r4", "j", NOW, "ok"), NOW)  # its open wait closes
    auditor.tick(NOW + MIN)
    Retention(store.engine, WEEK).prune(NOW + 8 * DAY, budget_s=60)  # a restart: saved position

    assert 0 == idle
    assert "t-held-0" not in table_rows(store.engine, "wait_state")
    assert 19 == len(set(table_rows(store.engine, "wait_state")))


def _vm_steps(store: Store) -> list[int]:
    """SQLite's virtual-machine steps of every statement on `store` (the work a pass does,
    whatever the machine's speed), counted into the list's one item."""
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    event.listen(store.engine, "checkout", lambda dbapi, *_: dbapi.set_progress_handler(count, 1))
    return steps


def test_a_pass_reads_the_heartbeats_that_aged_or_arrived_not_the_whole_table(
    tmp_path: Path,
) -> None:
    # Kept: old beats of threads that asked (their thread stays). Young: beats of threads
    # that never asked, newer than the cutoff. Neither is pruned; a pass must read neither
    # again, however many there are. A ghost's old beat in each lot is pruned.
    store = Store(open_store(f"sqlite:///{tmp_path / 's.db'}"))
    retention = Retention(store.engine, WEEK)
    steps = _vm_steps(store)

    def lot(threads: range) -> None:
        lines: list[dict[str, Any]] = []
        for n in threads:
            lines += asked(f"t-kept-{n}", T0)
            lines += [heartbeat(f"t-kept-{n}", T0 + k * HOUR) for k in range(1, 4)]
            lines.append(heartbeat(f"t-young-{n}", NOW - HOUR))
        ingest(store, [*lines, heartbeat(f"t-ghost-{threads.start}", T0)], NOW)

    def prune() -> int:
        before = steps[0]
        retention.prune(NOW, budget_s=600)
        return steps[0] - before

    lot(range(3))
    prune()
    few = prune()
    lot(range(3, 300))
    prune()
    many = prune()

    ghosts = [t for t in table_rows(store.engine, "heartbeat") if t.startswith("t-ghost")]
    assert ([], 300 * 4) == (ghosts, len(table_rows(store.engine, "heartbeat")))
    assert many <= few * 1.2, (few, many)
    store.engine.dispose()


def test_heartbeats_of_no_wait_go_once_old_whether_they_age_or_arrive_late(
    open_stores: Callable[[], Store],
) -> None:
    """The walk goes on from where it was: a beat that grows old after it passed the end, and
    a late one already older than where it is, each go at the next pass; a thread's beats
    that are not old yet stay."""
    store = open_stores()
    retention = Retention(store.engine, WEEK, batch=2)
    ingest(store, [heartbeat("t-aging", T0 + 2 * HOUR), heartbeat("t-late", T0 + 3 * DAY)], T0)
    assert 0 == retention.prune(T0 + 2 * DAY, budget_s=60).unknown  # nothing old yet

    first = retention.prune(T0 + WEEK + DAY, budget_s=60)
    ingest(
        store,
        # Older than t-aging's beat, where the walk by age is now.
        [heartbeat("t-late", T0 + HOUR), *(heartbeat(f"t-new-{n}", T0 + WEEK) for n in range(5))],
        T0 + WEEK + DAY,
    )
    second = retention.prune(T0 + WEEK + 2 * DAY, budget_s=60)

    assert (1, 1) == (first.unknown, second.unknown)  # t-aging, then t-late's late beat
    assert [T0 + 3 * DAY, *([T0 + WEEK] * 5)] == table_rows(store.engine, "heartbeat", "at")


def test_a_span_cut_back_behind_the_walk_goes_with_its_threads_other_old_beats(
    db_url: str,
) -> None:
    """A late beat of the other handle cuts a span that was not old yet (store.heartbeats):
    the span's first part now ends before where the walk by age is. It goes with the part
    after the cut and the late beat, which the walk meets."""
    store = Store(open_store(db_url), heartbeat_gap_ms=MIN)
    retention = Retention(store.engine, WEEK)
    beats = [heartbeat("t-cut", T0 + HOUR + k * 30 * SEC) for k in range(241)]  # 1 h to 3 h
    ingest(store, [heartbeat("t-old", T0 + 2 * HOUR), *beats], T0)
    assert 1 == retention.prune(T0 + WEEK + 2 * HOUR + MIN, budget_s=60).unknown  # t-old
    late = custom("sidewatch.heartbeat", T0 + 90 * MIN + 1, threadId="t-cut", resumeHandle=None)
    ingest(store, [late], T0 + WEEK)
    assert 3 == len(table_rows(store.engine, "heartbeat"))  # cut in two, and the late beat

    pruned = retention.prune(T0 + WEEK + 4 * HOUR, budget_s=60)

    assert (3, []) == (pruned.unknown, table_rows(store.engine, "heartbeat"))
    store.engine.dispose()


def test_a_span_still_beating_when_the_walk_passes_it_goes_once_its_last_beat_is_old(
    db_url: str,
) -> None:
    store = Store(open_store(db_url), heartbeat_gap_ms=HOUR)
    retention = Retention(store.engine, WEEK)
    beats = [heartbeat("t-long", T0 + k * 30 * MIN) for k in range(8 * 48 + 25)]  # to 8d 12h
    ingest(store, [*beats, heartbeat("t-first", T0 - HOUR)], T0 + 9 * DAY)
    assert 2 == len(table_rows(store.engine, "heartbeat"))  # one span each

    # The cutoff at day 8: t-long's span began before it, but beats on after it. The next
    # pass (within the day the walk goes on for) has the cutoff after its last beat.
    assert 1 == retention.prune(T0 + WEEK + 8 * DAY, budget_s=60).unknown  # t-first
    after = retention.prune(T0 + WEEK + 8 * DAY + 20 * HOUR, budget_s=60)

    assert (1, []) == (after.unknown, table_rows(store.engine, "heartbeat"))
    store.engine.dispose()
