"""`store.retention` by the evidence's time, on SQLite and PostgreSQL: a wait closed (by its
evidence) before the cutoff goes at the next pass however late sidewatch learned of it, and
one closed inside the retention goes once its closing time is that old, not its recording's;
a pass reads what was recorded or came due since the last, not the waits the store keeps; and
a backfill pruned at once (the newest rows) lets no later one slip behind a walk by id."""

from __future__ import annotations

from collections.abc import Callable

from sidewatch.app.audit import Auditor
from sidewatch.app.prune import Retention
from sidewatch.store.repo import Store
from tests.app.test_prune import (
    DAY,
    HOUR,
    MIN,
    NOW,
    POLICIES,
    WEEK,
    answered,
    asked,
    custom,
    heartbeat,
    held,
    ingest,
    table_rows,
)


def closed(threads: list[str], at: int) -> list[dict[str, object]]:
    """Each thread asks at `at` and is answered (accepted, resumed) a minute on."""
    return [x for t in threads for x in [*asked(t, at), *answered(t, at + MIN, "approve")]]


def test_a_backfill_closed_sixty_days_ago_goes_at_the_next_pass(
    open_stores: Callable[[], Store],
) -> None:
    store = open_stores()
    auditor = Auditor(store, POLICIES, retention_ms=WEEK)  # the daemon's, clock-jump guard on
    old = [f"t-old-{n}" for n in range(20)]
    ingest(store, [*closed(old, NOW - 60 * DAY), *closed(["t-recent"], NOW - DAY)], NOW)
    ingest(store, [heartbeat("t-today", NOW)], NOW)  # the store hears today's traffic too
    auditor.tick(NOW + MIN)

    pruned = auditor.prune(NOW + 2 * MIN, budget_s=60)

    assert pruned is not None
    assert (20, 20, True) == (pruned.threads, pruned.waits, pruned.done)
    assert ["t-recent"] == table_rows(store.engine, "wait_state")
    assert ["t-recent"] == sorted(set(table_rows(store.engine, "interrupt")))


def test_a_wait_goes_once_its_closing_is_as_old_as_the_retention_not_its_recording(
    open_stores: Callable[[], Store],
) -> None:
    store = open_stores()
    auditor = Auditor(store, POLICIES)
    retention = Retention(store.engine, WEEK)
    ingest(store, closed(["t-a"], NOW - 3 * DAY), NOW)  # learned of three days late
    auditor.tick(NOW + MIN)

    early = retention.prune(NOW + 4 * DAY - 2 * MIN)
    due = retention.prune(NOW + 4 * DAY + 2 * MIN)

    assert (0, 1) == (early.threads, due.threads)
    assert [] == table_rows(store.engine, "wait_state")


def test_a_pass_reads_the_waits_newly_due_not_those_it_passed_before(
    open_stores: Callable[[], Store],
) -> None:
    # Threads held by an open wait keep their old closed waits (no policies: no look inside):
    # a pass reads them once, when they come due or are recorded, never again.
    store = open_stores()
    auditor = Auditor(store, POLICIES)
    retention = Retention(store.engine, WEEK)

    def kept(threads: range, at: int, now: int) -> None:
        ingest(store, held(threads, at), now)
        auditor.tick(now + MIN)
        retention.prune(now + 2 * MIN)

    def backfill(now: int, name: str) -> list[tuple[int, int]]:
        """Five threads closed 60 days ago and one closed now, recorded now: the pass now
        and the pass once the one closed now is due, (threads pruned, rows read) of each."""
        ingest(store, closed([f"{name}-{n}" for n in range(5)], now - 60 * DAY), now + MIN)
        ingest(store, closed([f"{name}-late"], now), now + MIN)
        auditor.tick(now + 2 * MIN)
        out = []
        for at in (now + 3 * MIN, now + 8 * DAY):
            out.append((retention.prune(at).threads, retention.examined))
        return out

    kept(range(3), NOW - 30 * DAY, NOW - DAY)
    few = backfill(NOW, "a")
    kept(range(3, 60), NOW - 20 * DAY, NOW + 9 * DAY)  # old, and recorded late too
    many = backfill(NOW + 10 * DAY, "b")

    assert 60 == len(set(table_rows(store.engine, "wait_state")))
    assert [5, 1] == [threads for threads, _ in few]
    assert few == many


def test_a_wait_recorded_after_the_clock_went_back_goes_when_its_closing_is_old(
    open_stores: Callable[[], Store],
) -> None:
    store = open_stores()
    auditor = Auditor(store, POLICIES)
    retention = Retention(store.engine, WEEK)
    ingest(store, closed(["t-first"], NOW), NOW + 2 * MIN)
    auditor.tick(NOW + 3 * MIN)
    retention.prune(NOW + 10 * DAY)  # a clock ten days ahead: pruned up to NOW + 3 days
    ingest(store, closed(["t-b"], NOW + 2 * DAY), NOW + 2 * DAY + 2 * MIN)
    auditor.tick(NOW + 2 * DAY + 3 * MIN)

    back = retention.prune(NOW + 8 * DAY)  # set right: t-b closed inside the retention
    due = retention.prune(NOW + 9 * DAY + 2 * MIN)

    assert (0, 1) == (back.threads, due.threads)
    assert [] == table_rows(store.engine, "wait_state")


def test_a_backfill_after_a_backfill_pruned_whole_goes_too(
    open_stores: Callable[[], Store],
) -> None:
    # The first backfill's transitions are the newest rows, and go: SQLite gives the next
    # rows the ids they had, which the walk by recording has passed.
    store = open_stores()
    auditor = Auditor(store, POLICIES, retention_ms=WEEK)
    ingest(store, [heartbeat("t-today", NOW)], NOW)
    for k, now in enumerate((NOW + MIN, NOW + HOUR)):
        ingest(store, closed([f"t-{k}-{n}" for n in range(3)], NOW - 60 * DAY), now)
        auditor.tick(now + MIN)
        pruned = auditor.prune(now + 2 * MIN, budget_s=60)

        assert pruned is not None
        assert 3 == pruned.threads, k
        assert [] == table_rows(store.engine, "wait_state")


def test_evidence_naming_no_wait_backfilled_twice_goes_both_times(
    open_stores: Callable[[], Store],
) -> None:
    store = open_stores()
    retention = Retention(store.engine, WEEK)
    for k, now in enumerate((NOW, NOW + HOUR)):
        route = custom("sidewatch.route", NOW - 60 * DAY, requestId=f"nobody-{k}/i", delivered=True)
        ingest(store, [route], now)

        pruned = retention.prune(now + MIN)

        assert 1 == pruned.unknown, k
        assert [] == table_rows(store.engine, "signal", "request_id")
