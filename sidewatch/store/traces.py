"""The runs' W3C trace contexts (`run_trace`), read for the trace exporter: the asking runs'
and those of the runs that answered or continued the waits that closed in a tick, in one read
for the whole tick (a statement per 500 runs), whatever the threads' ages."""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import Engine

from sidewatch.store.sql import chunks, driver_sql

RunTrace = tuple[str, str | None]  # (traceparent, tracestate)
RunKey = tuple[str, str]  # (thread, run): a run id is unique only within its thread


def select_sql(n: int) -> str:
    """The read of `n` runs' contexts, in qmark style: the runs as a VALUES list joined to
    `run_trace` by its unique key, which both databases then search run by run (a row-value
    `IN (VALUES …)` made SQLite scan the whole table)."""
    values = ", ".join("(?, ?)" for _ in range(n))
    return (
        f"WITH k (thread_id, run_id) AS (VALUES {values}) "  # noqa: S608 (marks only)
        "SELECT k.thread_id, k.run_id, traceparent, tracestate FROM k "
        "JOIN run_trace t ON t.thread_id = k.thread_id AND t.run_id = k.run_id"
    )


def run_traces(engine: Engine, runs: Collection[RunKey]) -> dict[RunKey, RunTrace]:
    """The trace context of each of `runs` that has one, by (thread, run): an indexed look-up
    of each (`uq_run_trace_key`), never a scan of a thread's runs."""
    out: dict[RunKey, RunTrace] = {}
    keys = sorted(set(runs))
    if not keys:
        return out
    with engine.connect() as c:
        for part in chunks(keys):
            sql = select_sql(len(part))
            params = tuple(v for key in part for v in key)
            for thread, run, parent, state in c.exec_driver_sql(driver_sql(c, sql), params):
                out[(str(thread), str(run))] = (
                    str(parent),
                    None if state is None else str(state),
                )
    return out
