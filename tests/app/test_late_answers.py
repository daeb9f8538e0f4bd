"""agno and Mastra keep a paused call after a later run finished in success, and run it when an
answer comes later (tests/ingest/producers/fixtures, captured live): the wait they moved past
reopens and is RESUMED, with `answered_after_moved_past`, ingested and audited as the daemon
does, on SQLite and PostgreSQL. A certain cancel stays closed (the spec: see the last test)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from sqlalchemy import text

from sidewatch.app import evaluate as evaluation
from sidewatch.app.audit import Audited, Auditor
from sidewatch.app.read import Read
from sidewatch.core.vocab import FindingRule
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store
from tests.app.test_checkpoint_tick import (
    QUIET,
    RUNS,
    START,
    THREAD,
    _ingest,
    _run,
    _states,
    _whole,
)
from tests.ingest.producers.captures import audited, capture
from tests.ingest.producers.test_frontend import frontend_waits

REOPENED = FindingRule.ANSWERED_AFTER_MOVED_PAST


def _seen(waits: list[Audited]) -> list[tuple[str, str | None, bool, bool]]:
    """(state, decision, uncertain, reopened) of every wait."""
    return [
        (
            a.verdict.state.value,
            a.verdict.facts.decision and a.verdict.facts.decision.value,
            a.verdict.uncertain,
            REOPENED in a.verdict.findings,
        )
        for a in waits
    ]


def test_agno_s_late_answer_after_a_later_run_reopens_the_wait_it_resumes(db_url: str) -> None:
    body = capture("agno-late-answer-after-later-run")

    waits = frontend_waits(db_url, body, ("delete_file",))

    assert [("RESUMED", "accept", False, True)] == _seen(waits)


def test_mastra_s_late_answer_after_a_later_run_reopens_the_wait_it_resumes(db_url: str) -> None:
    waits = audited(db_url, "mastra-late-answer-after-later-run")

    assert [("RESUMED", "accept", False, True)] == _seen(waits)


def test_a_producer_that_moved_past_and_got_no_answer_leaves_the_wait_cancelled(
    db_url: str,
) -> None:
    waits = audited(db_url, "mastra-new-message-no-resume")

    assert [("CANCELLED", None, True, False)] == _seen(waits)


def test_mastra_s_answer_after_a_cancel_does_not_reopen_the_certain_cancel(db_url: str) -> None:
    # The refund ran in run 3 (Mastra's adapter answers a cancelled entry alone and keeps the
    # suspension), but the spec keeps an explicit cancel closed for good: a spec conflict,
    # pinned here so that a change of the spec changes this test on purpose.
    waits = audited(db_url, "mastra-cancel-then-answer")

    assert [("CANCELLED", "cancel", False, False)] == _seen(waits)


# --- in a long thread, past its checkpoint --------------------------------------------------


def _unanswered(i: int) -> list[dict[str, Any]]:
    """Run i of the long thread, but nobody answers: the run after each wait moves past it."""
    return [{**line, "resume": []} if "messages" in line else line for line in _run(i)]


def _late_answer(store: Store, interrupt_id: str, at: int) -> None:
    run = "run-late"
    _ingest(
        store,
        [
            {
                "threadId": THREAD,
                "runId": run,
                "messages": [],
                "resume": [{"interruptId": interrupt_id, "status": "resolved", "payload": {}}],
                "timestamp": at,
            },
            {"type": "RUN_STARTED", "threadId": THREAD, "runId": run, "timestamp": at},
            {"type": "RUN_FINISHED", "threadId": THREAD, "runId": run, "timestamp": at + 2},
        ],
        at,
    )


def test_a_late_answer_reaches_a_wait_settled_cancelled_before_the_checkpoint(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(evaluation, "LONG", 50)  # facts: this thread is a long one
    store = Store(open_store(db_url))
    _ingest(store, [line for i in range(1, RUNS + 1) for line in _unanswered(i)], START)
    now, rid = START + 100_000, f"{THREAD}/approve-10"
    auditor = Auditor(store, (QUIET,))
    auditor.tick(now)
    with store.engine.connect() as c:
        (cut,) = c.execute(text("SELECT cut FROM thread_checkpoint")).one()
        kept = set(c.execute(text("SELECT request_id FROM settled_wait")).scalars())
    assert (cut, True, "CANCELLED") == (START + RUNS * 1000, rid in kept, _states(store)[rid][0])

    _late_answer(store, "approve-10", now)
    got = Read(store, lambda a, r: QUIET).wait(rid, now + 1000)  # before any tick
    auditor.tick(now + 60_000)

    assert got is not None
    assert ("RESUMED", True) == (got["state"], REOPENED in got["findings"])
    assert ("RESUMED", now) == _states(store)[rid]
    assert _whole(store, now + 60_000) == _states(store)
    with store.engine.connect() as c:
        moves = c.execute(
            text("SELECT from_state, to_state, earlier FROM transition WHERE request_id = :r"),
            {"r": rid},
        ).all()
    assert "CANCELLED" in {m[0] for m in moves} | {e[0] for m in moves for e in _earlier(m[2])}
    store.engine.dispose()


def _earlier(text_: str | None) -> list[list[Any]]:
    return orjson.loads(text_) if text_ else []
