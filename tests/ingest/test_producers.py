"""What real producers send (captured from ag-ui-langgraph 0.0.47 and ag-ui-adk 0.11.0, see
tests/fixtures/producers/README.md), ingested as one unit each, and the verdicts it gives."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from sidewatch.app.audit import audit
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.core.assemble import assemble
from sidewatch.core.facts import FindingFact
from sidewatch.core.policy import DEFAULT_POLICY, Need
from sidewatch.ingest.agui import Interpreter
from sidewatch.ingest.reader import frame
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store

PRODUCERS = Path(__file__).resolve().parents[1] / "fixtures" / "producers"
NOW = 1_785_083_400_000

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
    # the producer dropped it (docs/interpretations.md); the first approval was never run
    "adk-two-confirmations-default-separate-runs": [
        ("STUCK_AFTER_DECISION", "accept", False),
        ("CANCELLED", None, True),
    ],
}
# These integrations report no route, handle or heartbeat: a deployment marks them ignored.
QUIET = replace(
    DEFAULT_POLICY, name="quiet", route=Need.IGNORED, handle=Need.IGNORED, heartbeat=Need.IGNORED
)


def _verdicts(db_url: str, name: str) -> list[tuple[str, str | None, bool]]:
    return verdicts_of(db_url, (PRODUCERS / f"{name}.ndjson").read_bytes())


def verdicts_of(
    db_url: str, body: bytes, received: int = NOW - 60_000, at: int = NOW
) -> list[tuple[str, str | None, bool]]:
    """(state, decision, uncertain) of every wait of one unit received at `received` and
    audited at `at`, in requested order."""
    engine = open_store(db_url)
    store = Store(engine)
    summary = Ingest(store, ref_protector(engine, Config()), Config()).body(
        "producer", body, received
    )
    waits = audit(store, (QUIET,), at)
    engine.dispose()
    assert () == summary.rejects
    return [
        (
            a.verdict.state.value,
            a.verdict.facts.decision and a.verdict.facts.decision.value,
            a.verdict.uncertain,
        )
        for a in waits
    ]


@pytest.mark.parametrize(("name", "expected"), LANGGRAPH.items(), ids=list(LANGGRAPH))
def test_langgraph_streams_get_the_verdicts_of_what_happened(
    db_url: str, name: str, expected: list[tuple[str, str | None, bool]]
) -> None:
    assert expected == _verdicts(db_url, name)


@pytest.mark.parametrize(("name", "expected"), ADK.items(), ids=list(ADK))
def test_adk_streams_get_the_verdicts_of_what_happened(
    db_url: str, name: str, expected: list[tuple[str, str | None, bool]]
) -> None:
    assert expected == _verdicts(db_url, name)


def test_an_adk_wait_is_the_original_call_not_the_confirmation(db_url: str) -> None:
    engine = open_store(db_url)
    store = Store(engine)
    body = (PRODUCERS / "adk-approve-default.ndjson").read_bytes()
    Ingest(store, ref_protector(engine, Config()), Config()).body("adk", body, NOW - 60_000)

    (wait,) = audit(store, (QUIET,), NOW)
    engine.dispose()

    ev = wait.evidence
    assert ("delete_file", "confirmation", True) == (ev.action, ev.reason, ev.tool_result_receipt)
    assert ev.interrupt_id.startswith("adk-")
    assert ev.tool_call_id is not None and not ev.tool_call_id.startswith("adk-")


def test_a_legacy_interrupt_without_raw_event_gets_a_positional_id_and_a_finding() -> None:
    body = (PRODUCERS / "langgraph-approve-legacy-noraw.ndjson").read_bytes()

    result = Interpreter(NOW, 0, lambda ref: ref).read(frame(body))

    findings = [(f.rule, f.interrupt_id) for f in result.facts if isinstance(f, FindingFact)]
    assert [("legacy_interrupt_without_id", "run-1#1")] == findings


FINDINGS = {
    # a second run started while the interrupt was open and did not answer it
    "langgraph-replay-then-legacy-approve": [("run_ignores_open_interrupt",)],
    # ag-ui-langgraph refuses a resume[] with two entries (RUN_ERROR)
    "langgraph-two-interrupts-resume10": [("resume_rejected",), ("resume_rejected",)],
    # ag-ui-adk's outcome mode refuses a tool-message answer (RUN_ERROR)
    "adk-outcome-answered-by-tool-message": [("resume_rejected",)],
    "adk-approve-default": [()],
    "langgraph-approve-legacy": [()],
}


@pytest.mark.parametrize(("name", "expected"), FINDINGS.items(), ids=list(FINDINGS))
def test_protocol_findings_are_listed_per_wait(
    db_url: str, name: str, expected: list[tuple[str, ...]]
) -> None:
    engine = open_store(db_url)
    store = Store(engine)
    body = (PRODUCERS / f"{name}.ndjson").read_bytes()
    Ingest(store, ref_protector(engine, Config()), Config()).body(name, body, NOW - 60_000)

    waits = audit(store, (QUIET,), NOW)
    engine.dispose()

    assert expected == [a.verdict.findings for a in waits]


def test_a_resume_naming_no_interrupt_is_a_thread_finding(db_url: str) -> None:
    engine = open_store(db_url)
    store = Store(engine)
    body = (PRODUCERS / "adk-outcome-resume10-wrong-id.ndjson").read_bytes()
    Ingest(store, ref_protector(engine, Config()), Config()).body("adk", body, NOW - 60_000)

    (thread,) = store.threads()
    found = assemble(thread, lambda action, reason: QUIET).findings
    engine.dispose()

    assert ["answer_unknown_interrupt"] == [f.rule for f in found]
