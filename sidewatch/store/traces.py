"""The runs' W3C trace contexts (`run_trace`), read for the trace exporter: the asking run's
and those of the runs that answered or continued a wait, when its span is written."""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import Engine

from sidewatch.store.sql import chunks, driver_sql

RunTrace = tuple[str, str | None]  # (traceparent, tracestate)
_SELECT = "SELECT run_id, traceparent, tracestate FROM run_trace WHERE thread_id = ?"


def run_traces(engine: Engine, thread: str, runs: Collection[str]) -> dict[str, RunTrace]:
    """The trace context of each of `runs` of `thread` that has one, by run id."""
    out: dict[str, RunTrace] = {}
    ids = sorted(set(runs))
    if not ids:
        return out
    with engine.connect() as c:
        for part in chunks(ids):
            marks = ", ".join("?" for _ in part)
            sql = f"{_SELECT} AND run_id IN ({marks})"
            for run, parent, state in c.exec_driver_sql(driver_sql(c, sql), (thread, *part)):
                out[str(run)] = (str(parent), None if state is None else str(state))
    return out
