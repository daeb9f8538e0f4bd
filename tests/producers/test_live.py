"""The real integrations, driven offline now (scripted fake models, no network): ag-ui-langgraph
with a graph that calls `interrupt()`, and ag-ui-adk with a tool that requires confirmation, in
each integration's interrupt modes. Exactly what they emit is fed to sidewatch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.ingest.test_producers import ADK, LANGGRAPH, verdicts_of

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def emitted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Run both capture scripts once (each in its own process: they are the producers' code,
    under the producers' own warning settings)."""
    out = tmp_path_factory.mktemp("producers")
    for script in ("capture_langgraph.py", "capture_adk.py"):
        done = subprocess.run(
            [sys.executable, str(HERE / script), str(out)],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert 0 == done.returncode, done.stderr[-2000:]
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
    lines = (emitted / f"{name}.ndjson").read_bytes().splitlines()
    first_run = lines[: next(n for n, line in enumerate(lines) if b'"RUN_FINISHED"' in line) + 1]

    got = verdicts_of(db_url, b"\n".join(first_run))

    assert got and all(v == ("WAITING", None, False) for v in got)
