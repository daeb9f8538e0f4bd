"""Retiming a run's stored input: an input posted with no `timestamp` was stored with its
unit's ingest time, and its run's `RUN_STARTED`, in a later unit, gives the time it should
have taken (ingest.untimed). Done in that unit's transaction: the facts of the run's input
line (the `run_fact` row marked `input` and every fact of the same thread, run and `seq`:
its answers, legacy resume, findings, trace context, all stored with the line's ingest time)
take the start time.

Keyed by thread and run, and by the stored input's own `seq`: an input delivered again stored
nothing new, and the first delivery's facts are the ones retimed; a retime done already
changes nothing (idempotent)."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Connection

from sidewatch.core.facts import RunMark
from sidewatch.store.sql import driver_sql

# The tables an input line writes to (grammar.input and the dialects' `input` hooks).
_TABLES = ("run_fact", "answer", "legacy_resume", "finding", "run_trace")
_INPUT = "SELECT at, seq FROM run_fact WHERE thread_id = ? AND run_id = ? AND mark = ?"


def retime_inputs(
    conn: Connection, retimes: Iterable[tuple[str, str, int]]
) -> list[tuple[str, int]]:
    """The stored untimed inputs of these (thread, run, start time) retimed; returns (thread,
    earliest time concerned) of each thread whose facts moved, for its dirty mark. A thread
    whose checkpoint's prefix a moved fact was or is in loses its checkpoint (and what it
    kept of its settled waits): a fact moved within the prefix changes no count that a dirty
    mark would tell (store.suffix), so the thread is evaluated whole again, as a prune inside
    a thread does (store.history)."""
    moved: list[tuple[str, int]] = []
    for thread, run, at in retimes:
        row = conn.exec_driver_sql(
            driver_sql(conn, _INPUT), (thread, run, RunMark.INPUT.value)
        ).first()
        if row is None or int(row[0]) == at:
            continue
        old, seq = int(row[0]), int(row[1])
        for table in _TABLES:
            conn.exec_driver_sql(
                driver_sql(
                    conn,
                    f"UPDATE {table} SET at = ? "  # noqa: S608 (names from the tuple above)
                    "WHERE thread_id = ? AND run_id = ? AND seq = ? AND at = ?",
                ),
                # Every fact of the line has its time: `finding`, keyed by (thread, at) alone,
                # is searched there, not walked through all of the thread's findings.
                (at, thread, run, seq, old),
            )
        early = min(old, at)
        gone = conn.exec_driver_sql(
            driver_sql(conn, "DELETE FROM thread_checkpoint WHERE thread_id = ? AND cut > ?"),
            (thread, early),
        ).rowcount
        if gone:
            conn.exec_driver_sql(
                driver_sql(conn, "DELETE FROM settled_wait WHERE thread_id = ?"), (thread,)
            )
        moved.append((thread, early))
    return moved
