"""What ag-ui-strands 1.0.2 sends (captured, see fixtures/README.md), ingested as one unit
each, and the verdicts it gives. Strands speaks AG-UI 1.0 (no dialect of its own): the
grammar's interrupts, `resume[]` answers and results, on a real producer."""

from __future__ import annotations

import pytest

from sidewatch.app.audit import audit
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store
from tests.ingest.producers.captures import (
    NOW,
    QUIET,
    Verdicts,
    capture,
    findings_as_captured,
    ingested_as_captured,
)

# file -> [(state, decision, uncertain)] of its waits, in the order they were requested
STRANDS: dict[str, Verdicts] = {
    # every resumed run reports the gated call's TOOL_CALL_RESULT, whatever the decision
    "strands-approve": [("RESUMED", "accept", False)],
    "strands-decline": [("CLOSED_BY_DECLINE", "decline", False)],
    # a cancel reaches the tool as approved:false; the person's answer was a cancel
    "strands-cancel": [("CANCELLED", "cancel", False)],
    "strands-two-approvals": [
        ("RESUMED", "accept", False),
        ("CLOSED_BY_DECLINE", "decline", False),
    ],
    # one answer for two interrupts is refused (RUN_STARTED + RUN_ERROR PARTIAL_RESUME); the
    # next run answers both and consumes them
    "strands-partial-resume": [("RESUMED", "accept", False), ("RESUMED", "accept", False)],
    # a resume naming no open interrupt is refused (INTERRUPT_RESUME_ERROR): still waiting
    "strands-wrong-id": [("WAITING", None, False)],
    # a new message while an approval is pending is refused (PENDING_INTERRUPTS)
    "strands-new-message-without-resume": [("WAITING", None, False)],
    # an interrupt raised inside a tool: no toolCallId, answered with a bare string
    "strands-generic-interrupt": [("RESUMED", "accept", False)],
    "strands-generic-interrupt-label-refused": [("CLOSED_BY_DECLINE", "decline", False)],
    # the same deterministic interrupt and call ids in two threads are two waits
    "strands-same-ids-two-threads": [
        ("RESUMED", "accept", False),
        ("CLOSED_BY_DECLINE", "decline", False),
    ],
}


@pytest.mark.parametrize(("name", "expected"), STRANDS.items(), ids=list(STRANDS))
def test_strands_streams_get_the_verdicts_of_what_happened(
    db_url: str, name: str, expected: Verdicts
) -> None:
    assert expected == ingested_as_captured(db_url, capture(name))


FINDINGS = {
    # refusals are RUN_STARTED + RUN_ERROR with a code
    "strands-partial-resume": [("resume_rejected",), ("run_ignores_open_interrupt",)],
    "strands-new-message-without-resume": [("run_ignores_open_interrupt",)],
    "strands-approve": [()],
}


@pytest.mark.parametrize(("name", "expected"), FINDINGS.items(), ids=list(FINDINGS))
def test_the_producers_refusals_and_broken_rules_are_findings(
    db_url: str, name: str, expected: list[tuple[str, ...]]
) -> None:
    assert expected == findings_as_captured(db_url, name)


def test_a_strands_wait_is_the_gated_call_with_its_deterministic_id(db_url: str) -> None:
    engine = open_store(db_url)
    store = Store(engine)
    body = capture("strands-same-ids-two-threads")
    Ingest(store, ref_protector(engine, Config()), Config()).body("strands", body, NOW - 60_000)

    waits = audit(store, (QUIET,), NOW)
    engine.dispose()

    assert [("delete_file", "tool_call", "call_del_1")] * 2 == [
        (a.evidence.action, a.evidence.reason, a.evidence.tool_call_id) for a in waits
    ]
    assert 1 == len({a.evidence.interrupt_id for a in waits})
    assert 2 == len({a.evidence.request_id for a in waits})
