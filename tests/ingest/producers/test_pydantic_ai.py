"""What pydantic-ai-slim 2.68.0's AG-UI adapter sends (captured, see fixtures/README.md),
ingested as one unit each, and the verdicts it gives. pydantic-ai speaks AG-UI 1.0 (no dialect
of its own), stamping every event with its own clock."""

from __future__ import annotations

import re

import pytest

from sidewatch.core.facts import VIA_EDITED, AnswerFact
from sidewatch.ingest.agui import Interpreter
from sidewatch.ingest.reader import frame
from tests.ingest.producers.captures import (
    NOW,
    Verdicts,
    audited_as_captured,
    capture,
    dropping,
    findings_as_captured,
    ingested_as_captured,
)

# file -> [(state, decision, uncertain)] of its waits, in the order they were requested
PYDANTIC_AI: dict[str, Verdicts] = {
    "pydantic-ai-approve": [("RESUMED", "accept", False)],
    "pydantic-ai-decline": [("CLOSED_BY_DECLINE", "decline", False)],
    "pydantic-ai-cancel": [("CANCELLED", "cancel", False)],
    # the edited action is the approved one: a normal continuation
    "pydantic-ai-edited-args": [("RESUMED", "accept", False)],
    "pydantic-ai-two-approvals": [
        ("RESUMED", "accept", False),
        ("CLOSED_BY_DECLINE", "decline", False),
    ],
    # {confirmed: true} fails the advertised schema: RUN_ERROR, so the accept is stuck
    "pydantic-ai-schema-failure": [("STUCK_AFTER_DECISION", "accept", False)],
    "pydantic-ai-wrong-id": [("WAITING", None, False)],
    # the run succeeds and drops the pending approval (AG-UI forbids it: a finding)
    "pydantic-ai-new-message-without-resume": [("CANCELLED", None, True)],
    # answering one of two runs that one and drops the other; a later run repeating the
    # answer fails ("no unprocessed tool calls"): the first wait was settled by a run that
    # succeeded, so the repeat is a finding, not a failed continuation
    "pydantic-ai-answer-one-of-two-then-repeat": [
        ("RESUMED", "accept", False),
        ("CANCELLED", None, True),
    ],
}


@pytest.mark.parametrize(("name", "expected"), PYDANTIC_AI.items(), ids=list(PYDANTIC_AI))
def test_pydantic_ai_streams_get_the_verdicts_of_what_happened(
    db_url: str, name: str, expected: Verdicts
) -> None:
    assert expected == ingested_as_captured(db_url, capture(name))


FINDINGS = {
    "pydantic-ai-schema-failure": [("resume_rejected",)],
    # pydantic-ai ends the run in success with the approval still open: AG-UI forbids it
    "pydantic-ai-new-message-without-resume": [
        ("run_ignores_open_interrupt", "dropped_unanswered")
    ],
    "pydantic-ai-answer-one-of-two-then-repeat": [
        ("repeated_answer_rejected",),
        ("run_ignores_open_interrupt", "dropped_unanswered"),
    ],
    "pydantic-ai-approve": [()],
}


@pytest.mark.parametrize(("name", "expected"), FINDINGS.items(), ids=list(FINDINGS))
def test_the_producers_refusals_and_broken_rules_are_findings(
    db_url: str, name: str, expected: list[tuple[str, ...]]
) -> None:
    assert expected == findings_as_captured(db_url, name)


def test_an_untimed_input_takes_the_time_its_producer_stamped_on_its_run_start() -> None:
    body = capture("pydantic-ai-approve")
    lines = body.splitlines()
    started = [line for line in lines if b'"RUN_STARTED"' in line][1]
    stamp = int(re.search(rb'"timestamp":(\d+)', started).group(1))  # type: ignore[union-attr]

    result = Interpreter(stamp + 10_000, 0, lambda ref: ref).read(frame(body))

    answers = [f for f in result.facts if isinstance(f, AnswerFact)]
    assert [stamp] == [a.at for a in answers]


def test_an_answer_with_edited_arguments_says_so() -> None:
    body = capture("pydantic-ai-edited-args")

    result = Interpreter(NOW, 0, lambda ref: ref).read(frame(body))

    answers = [f for f in result.facts if isinstance(f, AnswerFact)]
    assert [VIA_EDITED] == [a.via for a in answers]


def test_a_dropped_approval_says_which_evidence_shows_the_drop(db_url: str) -> None:
    body = dropping("pydantic-ai-two-approvals", b"call_del_a")
    (dropped, declined) = audited_as_captured(db_url, body)

    assert ("dropped_in_resume", None) == (
        dropped.verdict.facts.continuation_failure,
        declined.verdict.facts.continuation_failure,
    )


def test_a_lone_approval_whose_run_reports_no_result_stays_resumed(db_url: str) -> None:
    """Nothing shows that the producer reports results (LangGraph often does not): the run's
    start stays the receipt, and nothing pages."""
    body = dropping("pydantic-ai-approve", b"call_del_1")

    assert [("RESUMED", "accept", False)] == ingested_as_captured(db_url, body)
