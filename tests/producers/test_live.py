"""The real integrations, driven offline now (scripted fake models, no network): ag-ui-langgraph
with a graph that calls `interrupt()`, and ag-ui-adk with a tool that requires confirmation, in
each integration's interrupt modes. Exactly what they emit is fed to sidewatch."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.ingest.producers.captures import verdicts_of
from tests.ingest.producers.test_adk import ADK
from tests.ingest.producers.test_langgraph import LANGGRAPH
from tests.producers.harness import capture, first_run


@pytest.fixture(scope="module")
def emitted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Run both capture scripts once (each in its own process: they are the producers' code,
    under the producers' own warning settings)."""
    out = tmp_path_factory.mktemp("producers")
    for script in ("capture_langgraph.py", "capture_adk.py"):
        capture(sys.executable, script, out)
    return out


@pytest.mark.parametrize(("name", "expected"), {**LANGGRAPH, **ADK}.items(), ids=[*LANGGRAPH, *ADK])
def test_what_the_integration_emits_now_gets_the_verdicts_of_what_happened(
    emitted: Path, db_url: str, name: str, expected: list[tuple[str, str | None, bool]]
) -> None:
    assert expected == verdicts_of(db_url, (emitted / f"{name}.ndjson").read_bytes())


NEVER_ANSWERED = [
    "langgraph-approve-legacy",
    "langgraph-approve-resume10",
    "langgraph-approve-outcome-only",
    "langgraph-two-interrupts-legacy-map",
    "adk-approve-default",
    "adk-approve-outcome-resume10",
    "adk-two-confirmations-default",
]


@pytest.mark.parametrize("name", NEVER_ANSWERED)
def test_an_interrupt_nobody_answers_keeps_waiting(emitted: Path, db_url: str, name: str) -> None:
    got = verdicts_of(db_url, first_run((emitted / f"{name}.ndjson").read_bytes()))

    assert got and all(v == ("WAITING", None, False) for v in got)
