"""What real producers send (captured from ag-ui-langgraph 0.0.47 and ag-ui-adk 0.11.0, see
tests/fixtures/producers/README.md), ingested as one unit each, and the verdicts it gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from sidewatch.config import Config
from sidewatch.core.facts import FindingFact
from sidewatch.core.policy import DEFAULT_POLICY
from sidewatch.daemon.pipeline import audit, ingest_unit, ref_protector
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


def _verdicts(tmp_path: Path, name: str) -> list[tuple[str, str | None, bool]]:
    engine = open_store(f"sqlite:///{tmp_path / 's.db'}")
    store = Store(engine)
    body = (PRODUCERS / f"{name}.ndjson").read_bytes()
    summary = ingest_unit(store, name, body, NOW - 60_000, ref_protector(engine, Config()))
    waits = audit(store, (DEFAULT_POLICY,), NOW)
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
    tmp_path: Path, name: str, expected: list[tuple[str, str | None, bool]]
) -> None:
    assert expected == _verdicts(tmp_path, name)


def test_a_legacy_interrupt_without_raw_event_gets_a_positional_id_and_a_finding() -> None:
    body = (PRODUCERS / "langgraph-approve-legacy-noraw.ndjson").read_bytes()

    result = Interpreter(NOW, 0, lambda ref: ref).read(frame(body))

    findings = [(f.rule, f.interrupt_id) for f in result.facts if isinstance(f, FindingFact)]
    assert [("legacy_interrupt_without_id", "run-1#1")] == findings
