"""`store.retention` inside a thread that still has an open (or a young closed) wait: its closed
waits older than the cutoff go with the runs only they used, and the verdicts of the waits that
stay are proved unchanged before the deletion commits.

A run goes whole (its run facts, tool calls and results, answers, legacy resumes, heartbeats,
findings) when all of it is older than the cutoff and than every remaining wait's request,
and it announced only waits that go. Its interrupts stay, marked `pruned`: the engine then
knows that the id was used and closed (a reused id's next wait is `{thread}/{id}@{run}`, a
legacy resume map keyed by it is a map, an answer naming it is not a lone answer)."""

# ruff: noqa: S608 - every statement here is built of our own table and column names; every
# value is a bound parameter.
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from sidewatch.core.engine import Evaluated, PolicyFor, ThreadVerdicts, evaluate
from sidewatch.core.facts import ThreadFacts
from sidewatch.core.model import CLOSED_STATES
from sidewatch.store.load import load_threads
from sidewatch.store.sql import driver_sql

# The tables whose rows a run owns (by thread and run id).
RUN_TABLES = (
    "tool_call",
    "run_fact",
    "answer",
    "legacy_resume",
    "tool_result",
    "heartbeat",
    "subagent",
)  # and finding, counted by the caller


@dataclass(frozen=True, slots=True)
class Plan:
    """What goes from one thread: the waits (by requestId) and the runs (by run id)."""

    thread: str
    waits: frozenset[str]
    runs: frozenset[str]
    before: ThreadVerdicts  # the thread's verdicts with everything kept


def plan(
    facts: ThreadFacts, old: set[str], cutoff: int, policy_for: PolicyFor, now: int
) -> Plan | None:
    """The closed waits among `old` (requestIds the auditor recorded closed before the
    cutoff) that can go with the runs only they used; None: nothing can."""
    before = evaluate(facts, policy_for, now)
    if any(w.verdict is None for w in before.waits):
        return None  # a wait the engine cannot classify: nothing to compare against
    going: list[Evaluated] = []
    staying: list[Evaluated] = []
    for w in before.waits:
        closed = w.verdict is not None and w.verdict.state in CLOSED_STATES
        (going if closed and w.evidence.request_id in old else staying).append(w)
    if not going or not staying:
        return None  # nothing old, or the whole thread goes (store.retention)
    last: dict[str, int] = {}  # each run's latest fact (its findings are its waits')
    for group in (
        facts.runs,
        facts.tool_calls,
        facts.answers,
        facts.legacy_resumes,
        facts.tool_results,
        facts.interrupts,
        facts.heartbeats,
    ):
        for f in group:
            run = f.run_id
            if run is not None:
                last[run] = max(last.get(run, f.at), f.at)
    gone = going
    while True:  # a wait goes only with every run that announced it; one that stays holds
        left = {id(w) for w in gone}
        kept = staying + [w for w in going if id(w) not in left]  # the runs since its request
        horizon = min(cutoff, *(w.evidence.requested_at for w in kept))
        announcing = {r for w in kept for r in w.runs}
        runs = {r for r, at in last.items() if at < horizon and r not in announcing}
        still = [w for w in gone if w.runs <= runs]
        if len(still) == len(gone):
            break
        gone = still
    if not gone:
        return None
    return Plan(
        facts.thread_id, frozenset(w.evidence.request_id for w in gone), frozenset(runs), before
    )


def delete(c: Connection, p: Plan) -> None:
    """The plan's deletions, in the caller's transaction: the runs' rows, their interrupts
    marked pruned, the waits' signals by requestId."""
    runs = sorted(p.runs)
    for part in _chunks(runs):
        marks = ", ".join("?" for _ in part)
        where = f"thread_id = ? AND run_id IN ({marks})"
        for table in RUN_TABLES:
            c.exec_driver_sql(
                driver_sql(c, f"DELETE FROM {table} WHERE {where}"), (p.thread, *part)
            )
        c.exec_driver_sql(
            driver_sql(c, f"UPDATE interrupt SET pruned = ? WHERE {where}"), (True, p.thread, *part)
        )
    for part in _chunks(sorted(p.waits)):
        marks = ", ".join("?" for _ in part)
        c.exec_driver_sql(
            driver_sql(
                c,
                f"DELETE FROM signal WHERE request_id IN ({marks}) "
                "AND (thread_id IS NULL OR thread_id = ?)",
            ),
            (*part, p.thread),
        )


def unchanged(c: Connection, p: Plan, policy_for: PolicyFor, now: int) -> bool:
    """After `delete`, in its transaction: every wait that stays has the same evidence and
    verdict as before, and the thread noticed nothing it had not noticed before."""
    after = load_threads(c, [p.thread])
    if len(after) != 1:
        return False
    now_ = evaluate(after[0], policy_for, now)
    kept = [w for w in p.before.waits if w.evidence.request_id not in p.waits]
    return _same(kept, now_.waits) and set(now_.findings) <= set(p.before.findings)


def _same(a: Sequence[Evaluated], b: Sequence[Evaluated]) -> bool:
    return len(a) == len(b) and all(
        x.evidence == y.evidence and x.verdict == y.verdict and x.runs == y.runs
        for x, y in zip(a, b, strict=True)
    )


def _chunks(ids: list[str]) -> list[list[str]]:
    return [ids[k : k + 400] for k in range(0, len(ids), 400)]


def thread_rows(c: Connection, thread: str) -> list[Any]:
    """The auditor's records of the thread's waits: requestId, closed, since."""
    return list(
        c.exec_driver_sql(
            driver_sql(c, "SELECT request_id, closed, since FROM wait_state WHERE thread_id = ?"),
            (thread,),
        )
    )
