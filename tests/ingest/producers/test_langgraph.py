"""What ag-ui-langgraph 0.0.47 sends (captured, see fixtures/README.md), ingested as one unit
each, and the verdicts it gives: its legacy `on_interrupt` and `forwardedProps` resume
(sidewatch/ingest/producers/langgraph.py, on_interrupt.py)."""

from __future__ import annotations

import pytest

from sidewatch.app.audit import audit
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.core.facts import FindingFact
from sidewatch.ingest.agui import Interpreter
from sidewatch.ingest.reader import frame
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store
from tests.ingest.producers.captures import NOW, QUIET, capture, verdicts

# file -> [(state, decision, uncertain)] of its waits, in the order they were requested
LANGGRAPH = {
    "langgraph-approve-legacy": [("RESUMED", "accept", False)],
    "langgraph-approve-legacy-noraw": [("RESUMED", "accept", False)],
    "langgraph-decline-legacy-string": [("CLOSED_BY_DECLINE", "decline", False)],
    "langgraph-approve-resume10": [("RESUMED", "accept", False)],
    "langgraph-approve-default-resume10": [("RESUMED", "accept", False)],
    "langgraph-approve-outcome-only": [("RESUMED", "accept", False)],
    "langgraph-cancel-resume10": [("CANCELLED", "cancel", False)],
    "langgraph-hitl-middleware-legacy": [("CLOSED_BY_DECLINE", "decline", False)],
    "langgraph-replay-then-legacy-approve": [("RESUMED", "accept", False)],
    "langgraph-sequential-two-legacy": [("RESUMED", "accept", False)] * 2,
    "langgraph-tool-interrupt-approve-legacy": [("RESUMED", "accept", False)],
    "langgraph-tool-interrupt-decline-resume10": [("CLOSED_BY_DECLINE", "decline", False)],
    "langgraph-two-interrupts-legacy-map": [
        ("RESUMED", "accept", False),
        ("CLOSED_BY_DECLINE", "decline", False),
    ],
    # ag-ui-langgraph fails a resume[] with two entries with RUN_ERROR: the accepted one is
    # stuck; the other entry was a cancel, which the failed run still recorded.
    "langgraph-two-interrupts-resume10": [
        ("STUCK_AFTER_DECISION", "accept", False),
        ("CANCELLED", "cancel", False),
    ],
    # one resume[] entry naming an unknown id: ag-ui-langgraph applies it to the lone wait
    "langgraph-lone-answer-wrong-id-resume10": [("RESUMED", "accept", True)],
}


@pytest.mark.parametrize(("name", "expected"), LANGGRAPH.items(), ids=list(LANGGRAPH))
def test_langgraph_streams_get_the_verdicts_of_what_happened(
    db_url: str, name: str, expected: list[tuple[str, str | None, bool]]
) -> None:
    assert expected == verdicts(db_url, name)


def test_a_legacy_interrupt_without_raw_event_gets_a_positional_id_and_a_finding() -> None:
    body = capture("langgraph-approve-legacy-noraw")

    result = Interpreter(NOW, 0, lambda ref: ref).read(frame(body))

    findings = [(f.rule, f.interrupt_id) for f in result.facts if isinstance(f, FindingFact)]
    assert [("legacy_interrupt_without_id", "run-1#1")] == findings


FINDINGS = {
    # a second run started while the interrupt was open and did not answer it
    "langgraph-replay-then-legacy-approve": [("run_ignores_open_interrupt",)],
    # ag-ui-langgraph refuses a resume[] with two entries (RUN_ERROR)
    "langgraph-two-interrupts-resume10": [("resume_rejected",), ("resume_rejected",)],
    "langgraph-approve-legacy": [()],
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
