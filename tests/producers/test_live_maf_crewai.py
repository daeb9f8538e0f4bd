"""Microsoft Agent Framework's AG-UI integration and ag-ui-crewai, driven offline now (scripted
fake models, no network), each in the venv `make` builds for it from its pinned requirements
(`.tools/venv-maf`, `.tools/venv-crewai`; see tests/producers/venvs.py): their pins clash
with sidewatch's. Exactly what they emit is fed to sidewatch."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.ingest.producers.captures import verdicts_of
from tests.ingest.producers.test_agent_framework import MAF
from tests.ingest.producers.test_crewai import CREWAI
from tests.ingest.producers.test_frontend import MAF_FRONTEND, frontend_waits
from tests.producers.harness import capture, first_run
from tests.producers.venvs import producer_python

VENVS = {"capture_maf.py": "maf", "capture_crewai.py": "crewai"}


@pytest.fixture(scope="module")
def emitted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Run both capture scripts once, each in its integration's own venv and process."""
    out = tmp_path_factory.mktemp("producers")
    for script, venv in VENVS.items():
        python = producer_python(venv)
        env = {**os.environ, "CREWAI_STORAGE_DIR": str(tmp_path_factory.mktemp("crewai"))}
        env.pop("PYTHONPATH", None)  # the integration's venv alone, not sidewatch's path
        capture(python, script, out, env)
    return out


@pytest.mark.parametrize(("name", "expected"), {**MAF, **CREWAI}.items(), ids=[*MAF, *CREWAI])
def test_what_the_integration_emits_now_gets_the_verdicts_of_what_happened(
    emitted: Path, db_url: str, name: str, expected: list[tuple[str, str | None, bool]]
) -> None:
    assert expected == verdicts_of(db_url, (emitted / f"{name}.ndjson").read_bytes())


NEVER_ANSWERED = [
    "maf-approve",
    "maf-two-approve",
    "maf-workflow-request-info",
    "crewai-approve-default",
    "crewai-approve-outcome",
    "crewai-own-label-refused",
]


@pytest.mark.parametrize("name", NEVER_ANSWERED)
def test_an_interrupt_nobody_answers_keeps_waiting(emitted: Path, db_url: str, name: str) -> None:
    got = verdicts_of(db_url, first_run((emitted / f"{name}.ndjson").read_bytes()))

    assert got and all(v == ("WAITING", None, False) for v in got)


@pytest.mark.parametrize(("name", "expected"), MAF_FRONTEND.items(), ids=list(MAF_FRONTEND))
def test_confirm_changes_named_as_a_frontend_tool_is_the_approval_it_repeats(
    emitted: Path, db_url: str, name: str, expected: list[tuple[str, str | None, bool]]
) -> None:
    """With `waits.frontendTools: ["confirm_*"]`, Agent Framework's synthetic confirm_changes
    call opens no second wait, and a tool message for it answers the approval."""
    got = frontend_waits(db_url, (emitted / f"{name}.ndjson").read_bytes())

    assert expected == [
        (
            w.verdict.state.value,
            w.verdict.facts.decision and w.verdict.facts.decision.value,
            w.verdict.uncertain,
        )
        for w in got
    ]
