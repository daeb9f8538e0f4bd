"""What ag-ui-adk 0.11.0 sends (captured, see fixtures/README.md), ingested as one unit each,
and the verdicts it gives: a wait announced by a confirmation tool call and answered by a tool
message (sidewatch/ingest/producers/adk.py)."""

from __future__ import annotations

import pytest

from sidewatch.app.audit import audit
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store
from tests.ingest.producers.captures import NOW, QUIET, capture, thread_findings, verdicts

# file -> [(state, decision, uncertain)] of its waits, in the order they were requested
ADK = {
    # the receipt is the TOOL_CALL_RESULT of the original call, not the run's start
    "adk-approve-default": [("RESUMED", "accept", False)],
    "adk-approve-default-messages-snapshot": [("RESUMED", "accept", False)],
    "adk-approve-outcome-resume10": [("RESUMED", "accept", False)],
    "adk-decline-default": [("CLOSED_BY_DECLINE", "decline", False)],
    "adk-cancel-outcome-resume10": [("CANCELLED", "cancel", False)],
    "adk-two-confirmations-default": [
        ("RESUMED", "accept", False),
        ("CLOSED_BY_DECLINE", "decline", False),
    ],
    # ag-ui-adk drops the approved call here and still finishes the run: caught as stuck
    "adk-two-confirmations-default-interleaved": [
        ("STUCK_AFTER_DECISION", "accept", False),
        ("CLOSED_BY_DECLINE", "decline", False),
    ],
    "adk-two-confirmations-outcome-resume10": [
        ("STUCK_AFTER_DECISION", "accept", False),
        ("CLOSED_BY_DECLINE", "decline", False),
    ],
    # a tool-message answer in outcome mode is refused with a bare RUN_ERROR
    "adk-outcome-answered-by-tool-message": [("STUCK_AFTER_DECISION", "accept", False)],
    # a resume naming an unknown id is refused: the wait is still waiting for its answer
    "adk-outcome-resume10-wrong-id": [("WAITING", None, False)],
    # the first later run finishes without the pending second confirmation: by AG-UI's rule
    # the producer moved past it (docs/internals/interpretations/), but run 3 declines it: a late
    # answer reopens it (issue 31), and the decline closes it; the first approval never ran
    "adk-two-confirmations-default-separate-runs": [
        ("STUCK_AFTER_DECISION", "accept", False),
        ("CLOSED_BY_DECLINE", "decline", False),
    ],
}


@pytest.mark.parametrize(("name", "expected"), ADK.items(), ids=list(ADK))
def test_adk_streams_get_the_verdicts_of_what_happened(
    db_url: str, name: str, expected: list[tuple[str, str | None, bool]]
) -> None:
    assert expected == verdicts(db_url, name)


def test_an_adk_wait_is_the_original_call_not_the_confirmation(db_url: str) -> None:
    engine = open_store(db_url)
    store = Store(engine)
    body = capture("adk-approve-default")
    Ingest(store, ref_protector(engine, Config()), Config()).body("adk", body, NOW - 60_000)

    (wait,) = audit(store, (QUIET,), NOW)
    engine.dispose()

    ev = wait.evidence
    assert ("delete_file", "confirmation", True) == (ev.action, ev.reason, ev.tool_result_receipt)
    assert ev.interrupt_id.startswith("adk-")
    assert ev.tool_call_id is not None and not ev.tool_call_id.startswith("adk-")


FINDINGS = {
    # ag-ui-adk's outcome mode refuses a tool-message answer (RUN_ERROR)
    "adk-outcome-answered-by-tool-message": [("resume_rejected",)],
    "adk-approve-default": [()],
}


@pytest.mark.parametrize(("name", "expected"), FINDINGS.items(), ids=list(FINDINGS))
def test_protocol_findings_are_listed_per_wait(
    db_url: str, name: str, expected: list[tuple[str, ...]]
) -> None:
    engine = open_store(db_url)
    store = Store(engine)
    body = capture(name)
    Ingest(store, ref_protector(engine, Config()), Config()).body(name, body, NOW - 60_000)

    waits = audit(store, (QUIET,), NOW)
    engine.dispose()

    assert expected == [a.verdict.findings for a in waits]


def test_a_resume_naming_no_interrupt_is_a_thread_finding(db_url: str) -> None:
    assert ["answer_unknown_interrupt"] == thread_findings(db_url, "adk-outcome-resume10-wrong-id")
