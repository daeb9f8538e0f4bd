"""`store.retention` on SQLite and PostgreSQL: threads whose waits all closed before the cutoff
go with their facts, open waits stay whatever their age (their facts and verdicts identical),
old units and evidence naming no wait go, and every counter continues past the pruning."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from sqlalchemy import Engine, text

from sidewatch.app.audit import Auditor
from sidewatch.app.ingest import ingest_unit, ref_protector
from sidewatch.app.report import report
from sidewatch.config import Config
from sidewatch.core.engine import evaluate
from sidewatch.exporters.snapshot import DECISION_BUCKETS, RESUME_BUCKETS
from sidewatch.report.markdown import render_markdown
from sidewatch.store.repo import Store
from sidewatch.store.retention import Retention
from tests.daemon.test_auditor import counters

DAY = 86_400_000
MIN = 60_000
SEC = 1000
T0 = 1_785_081_600_000  # 2026-07-26T16:00:00Z
WEEK = 7 * DAY
POLICIES = Config().policies


def ingest(store: Store, lines: list[dict[str, Any]], received_at: int, bad: int = 0) -> None:
    body = b"\n".join([*(orjson.dumps(line) for line in lines), *([b"{not json"] * bad)])
    ingest_unit(store, "test", body, received_at, ref_protector(store.engine, Config()))


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

    assert (1, False) == (first.threads, first.done)
    assert (1, True) == (second.threads, second.done)


def test_a_report_reaching_back_before_the_cutoff_says_what_was_pruned(
    open_stores: Callable[[], Store],
) -> None:
    store = open_stores()
    history(store, Auditor(store, POLICIES))
    lines, moves = (
        sum(table_rows(store.engine, "line_count", "lines")),
        table_rows(store.engine, "transition", "id"),
    )
    Retention(store.engine, WEEK).prune(NOW, budget_s=60)
    lines -= sum(table_rows(store.engine, "line_count", "lines"))
    moved = len(moves) - len(table_rows(store.engine, "transition", "id"))

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
