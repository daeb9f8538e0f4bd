"""The running totals of the recorded verdicts (`running_total`, counter `waits`), that the
lists' counts read instead of counting wait_state: on SQLite and PostgreSQL they are the rows
of wait_state counted, by state, uncertain and policy, after every write of it: ticks that
record new waits and move old ones, a wait written twice in one save, a re-audit under new
policies, and retention pruning whole threads and closed waits inside threads."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace

from sqlalchemy import text

from sidewatch.app.audit import Auditor
from sidewatch.app.prune import Retention
from sidewatch.exporters.snapshot import DECISION_BUCKETS, RESUME_BUCKETS
from sidewatch.store.auditstate import AuditState, StoredState
from sidewatch.store.repo import Store
from sidewatch.store.sql import running_totals
from sidewatch.store.totals import WAITS, wait_key
from tests.app.test_prune import (
    NOW,
    POLICIES,
    T0,
    WEEK,
    history,
    kept_history,
)


def counted(store: Store) -> Counter[str]:
    """The rows of wait_state, counted by the totals' key."""
    with store.engine.connect() as c:
        rows = c.execute(
            text("SELECT state, uncertain, policy, count(*) FROM wait_state GROUP BY 1, 2, 3")
        )
        return Counter({wait_key(s, u, p): int(n) for s, u, p, n in rows})


def kept(store: Store) -> Counter[str]:
    with store.engine.connect() as c:
        totals = running_totals(c, WAITS)
    return Counter({key: n for (_, key), n in totals.items() if n})


def test_the_totals_are_the_recorded_verdicts_counted_after_every_write(
    open_stores: Callable[[], Store],
) -> None:
    store = open_stores()
    auditor = Auditor(store, POLICIES)
    history(store, auditor)  # ticks over ten days: waits recorded, moved, closed
    after_ticks = (counted(store), kept(store))
    kept_history(store, auditor)
    auditor.tick(NOW)
    after_more = (counted(store), kept(store))

    again = AuditState(store.engine)
    first = StoredState("x/i", "x", "default", "WAITING", False, T0, None, T0, None, None, T0)
    again.save([first, first._replace(state="STALE", uncertain=True)], [], [], [])
    twice = (counted(store), kept(store))
    # New policies: every open wait is evaluated again under them (and recorded anew).
    renamed = tuple(replace(p, name=f"{p.name}-v2") for p in POLICIES)
    Auditor(store, renamed).tick(NOW + 60_000)
    reaudited = (counted(store), kept(store))

    buckets = {"decision": DECISION_BUCKETS, "resume": RESUME_BUCKETS}
    pruned = Retention(store.engine, WEEK, buckets, policy_for=auditor.policy_for).prune(NOW, 60)
    after_pruning = (counted(store), kept(store))

    for rows, totals in (after_ticks, after_more, twice, reaudited, after_pruning):
        assert rows == totals
    assert 1 == twice[0][wait_key("STALE", True, "default")]
    assert any(k.endswith("|default-v2") for k in reaudited[0])
    assert pruned.waits > 0 and after_pruning[0].total() < reaudited[0].total()
