"""What ag-ui-crewai 1.0.0 sends, captured by tests/producers/capture_crewai.py (see
fixtures/README.md), ingested as one unit each, and the verdicts it gives: its pauses, named by
the thread id, and where it breaks AG-UI 1.0 (sidewatch/ingest/producers/crewai.py)."""

from __future__ import annotations

import pytest

from tests.ingest.producers.captures import audited, thread_findings, verdicts

# file -> [(state, decision, uncertain)] of its waits, in the order they were requested
CREWAI = {
    "crewai-approve-default": [("RESUMED", "accept", False)],
    "crewai-approve-outcome": [("RESUMED", "accept", False)],
    "crewai-decline-default": [("CLOSED_BY_DECLINE", "decline", False)],
    # the step's own outcome names, from responseSchema.enum
    "crewai-own-label-approved": [("RESUMED", "accept", False)],
    "crewai-own-label-refused": [("CLOSED_BY_DECLINE", "decline", False)],
    # what the person said; crewai ran the first outcome anyway (a finding, below)
    "crewai-cancel-default": [("CANCELLED", "cancel", False)],
    "crewai-cancel-outcome": [("CANCELLED", "cancel", False)],
    # crewai does not check the id: the lone answer is the lone wait's
    "crewai-wrong-id": [("CLOSED_BY_DECLINE", "decline", True)],
    # only the first entry is used; the second names nothing
    "crewai-two-entries": [("CLOSED_BY_DECLINE", "decline", False)],
    # both pauses are named by the thread id
    "crewai-two-pauses": [("RESUMED", "accept", False)] * 2,
    # the new message restarts the flow, which pauses again under the same id: one wait
    "crewai-new-message-no-resume": [("WAITING", None, False)],
}


@pytest.mark.parametrize(("name", "expected"), CREWAI.items(), ids=list(CREWAI))
def test_crewai_streams_get_the_verdicts_of_what_happened(
    db_url: str, name: str, expected: list[tuple[str, str | None, bool]]
) -> None:
    assert expected == verdicts(db_url, name)


def test_every_crewai_pause_of_a_thread_is_named_by_the_thread_id(db_url: str) -> None:
    waits = audited(db_url, "crewai-two-pauses")

    got = [(w.evidence.interrupt_id, w.evidence.reason) for w in waits]
    assert [("thread-crewai-two-pauses", "crewai:human_feedback")] * 2 == got


FINDINGS = {
    # AG-UI 1.0: a run that stops for an interrupt ends with the interrupt outcome
    "crewai-approve-default": [("interrupt_reported_as_success",)],
    "crewai-approve-outcome": [()],
    # AG-UI 1.0: a cancelled interrupt is not resolved; crewai runs its first outcome
    "crewai-cancel-default": [("interrupt_reported_as_success", "cancel_runs_first_outcome")],
    "crewai-cancel-outcome": [("cancel_runs_first_outcome",)],
    "crewai-two-pauses": [("interrupt_reported_as_success",)] * 2,
    "crewai-new-message-no-resume": [
        ("interrupt_reported_as_success", "run_ignores_open_interrupt")
    ],
}


@pytest.mark.parametrize(("name", "expected"), FINDINGS.items(), ids=list(FINDINGS))
def test_where_a_producer_breaks_ag_ui_1_0_the_wait_says_which_rule(
    db_url: str, name: str, expected: list[tuple[str, ...]]
) -> None:
    got = [w.verdict.findings for w in audited(db_url, name)]

    assert expected == got


def test_a_second_crewai_resume_entry_is_a_thread_finding(db_url: str) -> None:
    assert ["answer_unknown_interrupt"] == thread_findings(db_url, "crewai-two-entries")
