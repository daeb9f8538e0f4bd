"""Retention and the runs' trace contexts (`run_trace`, issue 32): a context goes with its run
(a closed thread old enough, a closed wait's runs inside a thread that stays), stays with an
open wait, and one naming no wait goes by age, counted as unknown evidence."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import text

from sidewatch.app.audit import Auditor
from sidewatch.app.prune import Retention
from sidewatch.store.repo import Store
from tests.app.test_prune import (
    MIN,
    NOW,
    POLICIES,
    T0,
    WEEK,
    answered,
    asked,
    ingest,
    table_rows,
)

PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def traced(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`lines` with a trace context on each run's input and `RUN_STARTED`."""
    return [
        {**line, "traceparent": PARENT}
        if line.get("type") in ("RUN_STARTED", None) and "runId" in line
        else line
        for line in lines
    ]


def test_a_runs_trace_context_goes_with_it_and_stays_with_an_open_wait(
    open_stores: Callable[[], Store],
) -> None:
    store = open_stores()
    auditor = Auditor(store, POLICIES)
    ingest(
        store,
        traced(
            [
                *asked("t-closed", T0),
                *answered("t-closed", T0 + MIN, "approve"),
                *asked("t-open", T0),
                *asked("t-mixed", T0),
                *answered("t-mixed", T0 + MIN, "approve"),
                *asked("t-mixed", T0 + 2 * MIN, "r3", "j"),
                {"threadId": "t-ghost", "runId": "g1", "messages": [], "timestamp": T0},
            ]
        ),
        T0 + 2 * MIN,
    )
    auditor.tick(T0 + 3 * MIN)
    before = table_rows(store.engine, "run_trace", "thread_id || '/' || run_id")

    pruned = Retention(store.engine, WEEK, policy_for=auditor.policy_for).prune(NOW, 60)

    after = table_rows(store.engine, "run_trace", "thread_id || '/' || run_id")
    with store.engine.connect() as c:
        counted = c.execute(
            text(
                "SELECT value FROM pruned_total "
                "WHERE counter = 'unknown_evidence' AND key = 'run_trace'"
            )
        ).scalar()
    assert [
        "t-closed/r1",
        "t-closed/r2",
        "t-ghost/g1",
        "t-mixed/r1",
        "t-mixed/r2",
        "t-mixed/r3",
        "t-open/r1",
    ] == before
    assert pruned.done
    assert ["t-mixed/r3", "t-open/r1"] == after  # the open waits' runs: their spans to come
    assert 1 == counted  # t-ghost's, naming no wait
