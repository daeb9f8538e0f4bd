"""What @ag-ui/mastra 1.1.2 on @mastra/core 1.71.0 sends, captured by
tests/producers/mastra/capture.mjs (see fixtures/README.md), ingested as one unit each, and the
verdicts it gives: a suspension's action and receipt are the suspended call's
(sidewatch/ingest/producers/mastra.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sidewatch.app.audit import audit
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.ingest.digest import action_digest, digest_of
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store
from tests.ingest.producers.captures import (
    NOW,
    QUIET,
    audited,
    capture,
    dropping,
    thread_findings,
    verdicts,
    verdicts_of,
)

GRACE = 5 * 60_000  # the default policy's resume grace
# file -> [(state, decision, uncertain)] of its waits, in the order they were requested.
MASTRA = {
    "mastra-approve": [("RESUMED", "accept", False)],
    "mastra-decline": [("CLOSED_BY_DECLINE", "decline", False)],
    "mastra-cancel": [("CANCELLED", "cancel", False)],
    # a new message moved past the suspension: closed provisionally, as the spec says
    "mastra-new-message-no-resume": [("CANCELLED", None, True)],
    # the second call is asked in run 2 under `run-1::…`; each runs when answered
    "mastra-two-suspensions": [("RESUMED", "accept", False)] * 2,
    # the resume broke the stream: the suspension is still there
    "mastra-wrong-id": [("WAITING", None, False)],
    # Mastra read only the (unknown) first entry and broke the stream: the approval in the
    # second entry was never read, so it answers nothing (below)
    "mastra-two-entries-unknown-first": [("WAITING", None, False)],
    # requireApproval is no interrupt: a plain pending call, and no wait without the config
    "mastra-require-approval": [],
    # a later run moved past the suspension, then an answer ran the refund: reopened by the
    # late answer (`answered_after_moved_past`, tests/app/test_late_answers.py)
    "mastra-late-answer-after-later-run": [("RESUMED", "accept", False)],
    # Mastra's adapter answered the cancel itself and kept the suspension: the later accept
    # ran the refund, but a certain CANCELLED never reopens (the spec; docs/internals/)
    "mastra-cancel-then-answer": [("CANCELLED", "cancel", False)],
}


@pytest.mark.parametrize(("name", "expected"), MASTRA.items(), ids=list(MASTRA))
def test_mastra_streams_get_the_verdicts_of_what_happened(
    db_url: str, name: str, expected: list[tuple[str, str | None, bool]]
) -> None:
    assert expected == verdicts(db_url, name)


def test_a_later_resume_entry_does_not_answer_a_mastra_suspension(db_url: str) -> None:
    """`mastra-two-entries-unknown-first`: @ag-ui/mastra resumes by the first `resume[]`
    entry only (an unknown id: the run broke after `RUN_STARTED`); the second entry's approval
    of the real suspension was never read. It is no decision (before: an approval that then
    read `STUCK_AFTER_DECISION`); the first entry is the one finding (its run never ends, so
    it is not yet one that ignored the wait)."""
    body, received = capture("mastra-two-entries-unknown-first"), NOW - 60_000

    assert [("WAITING", None, False)] == verdicts_of(db_url, body, received, received + GRACE + 1)
    assert ["answer_unknown_interrupt"] == thread_findings(
        db_url, "mastra-two-entries-unknown-first"
    )


def test_the_first_resume_entry_answers_a_mastra_suspension(db_url: str) -> None:
    """The same input with the real suspension's entry first: Mastra reads it, and so does
    sidewatch (the unknown id after it is no answer to anything)."""
    body = capture("mastra-two-entries-unknown-first")
    first, second = b'{"interruptId":"run-1::not-a-call"', b'{"interruptId":"run-1::call_refund_1"'
    swapped = body.replace(first, b"\0").replace(second, first).replace(b"\0", second)
    assert swapped != body

    assert [("WAITING", "accept", False)] == verdicts_of(db_url, swapped)


def test_an_approved_suspension_whose_run_finishes_without_its_result_is_stuck(
    db_url: str,
) -> None:
    """Mastra reports every resumed tool with its TOOL_CALL_RESULT: that result, not the run's
    start, consumes the approval."""
    body = dropping("mastra-approve", b"call_refund_1")

    assert [("STUCK_AFTER_DECISION", "accept", False)] == verdicts_of(db_url, body)


def test_a_lone_suspended_call_takes_its_action_and_digest_from_metadata_mastra(
    db_url: str,
) -> None:
    """No TOOL_CALL_* is streamed for it: the action is `metadata.mastra.toolName`, the digest
    is that of `{name, args}` from `metadata.mastra.args`."""
    (wait,) = audited(db_url, "mastra-approve")

    assert ("issueRefund", "call_refund_1") == (wait.evidence.action, wait.evidence.tool_call_id)
    assert digest_of({"name": "issueRefund", "args": {"order": "A-1", "amount": 20}}) == (
        wait.evidence.digest
    )


def test_a_streamed_suspended_call_gets_the_same_digest_from_metadata_as_from_its_arguments(
    db_url: str,
) -> None:
    """The first of two suspended calls is also streamed as TOOL_CALL_*: one digest either way."""
    lines = [json.loads(line) for line in capture("mastra-two-suspensions").splitlines()]
    args = "".join(
        e["delta"]
        for e in lines
        if e.get("type") == "TOOL_CALL_ARGS" and e["toolCallId"] == "call_refund_a"
    )
    first, _ = audited(db_url, "mastra-two-suspensions")

    assert action_digest("issueRefund", args) == first.evidence.digest


def test_the_suspended_calls_arguments_are_digested_never_stored(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sidewatch.db'}"
    secret = "s3cr3t-refund-order"
    body = capture("mastra-approve").replace(b"A-1", secret.encode())
    engine = open_store(url)
    store = Store(engine)

    summary = Ingest(store, ref_protector(engine, Config()), Config()).body("m", body, NOW)
    (wait,) = audit(store, (QUIET,), NOW + 60_000)
    engine.dispose()
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())

    assert () == summary.rejects
    assert digest_of({"name": "issueRefund", "args": {"order": secret, "amount": 20}}) == (
        wait.evidence.digest
    )
    assert b"issueRefund" in stored
    assert secret.encode() not in stored
