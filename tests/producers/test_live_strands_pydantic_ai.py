"""ag-ui-strands (a Strands `Agent` behind `StrandsAgent`, gated tools) and pydantic-ai's
`AGUIAdapter` (tools that require approval), driven offline now with scripted fake models.
Exactly what they emit is fed to sidewatch, ingested as it would be right after the run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.ingest.producers.captures import ingested_as_captured
from tests.ingest.producers.test_frontend import FRONTEND, frontend_waits
from tests.ingest.producers.test_pydantic_ai import PYDANTIC_AI
from tests.ingest.producers.test_strands import STRANDS
from tests.producers.harness import capture, first_run


@pytest.fixture(scope="module")
def emitted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Run both capture scripts once, each in its own process (the producers' own warnings)."""
    out = tmp_path_factory.mktemp("producers-sp")
    for script in ("capture_strands.py", "capture_pydantic_ai.py"):
        capture(sys.executable, script, out)
    return out


@pytest.mark.parametrize(
    ("name", "expected"), {**STRANDS, **PYDANTIC_AI}.items(), ids=[*STRANDS, *PYDANTIC_AI]
)
def test_what_the_integration_emits_now_gets_the_verdicts_of_what_happened(
    emitted: Path, db_url: str, name: str, expected: list[tuple[str, str | None, bool]]
) -> None:
    assert expected == ingested_as_captured(db_url, (emitted / f"{name}.ndjson").read_bytes())


NEVER_ANSWERED = [
    "strands-approve",
    "strands-two-approvals",
    "strands-generic-interrupt",
    "pydantic-ai-approve",
    "pydantic-ai-two-approvals",
]


@pytest.mark.parametrize("name", NEVER_ANSWERED)
def test_an_interrupt_nobody_answers_keeps_waiting(emitted: Path, db_url: str, name: str) -> None:
    got = ingested_as_captured(db_url, first_run((emitted / f"{name}.ndjson").read_bytes()))

    assert got and all(v == ("WAITING", None, False) for v in got)


def test_a_frontend_tool_is_no_wait_unless_configured(emitted: Path, db_url: str) -> None:
    """pydantic-ai ends the run in success and names the call in `pendingToolCallIds`; no
    `waits.frontendTools` is configured by default, so it opens no wait."""
    body = (emitted / "pydantic-ai-frontend-tool.ndjson").read_bytes()
    assert b'"pendingToolCallIds":["call_confirm_1"]' in body

    assert [] == ingested_as_captured(db_url, body)


@pytest.mark.parametrize(("name", "expected"), FRONTEND.items(), ids=list(FRONTEND))
def test_a_frontend_tool_named_in_the_config_is_a_wait(
    emitted: Path, db_url: str, name: str, expected: list[tuple[str, str | None, bool]]
) -> None:
    """With `waits.frontendTools: ["confirm_*"]`: Strands ends the run in success naming no
    pending calls (derived from the stream), pydantic-ai names them in `pendingToolCallIds`;
    either way the call is a wait, answered by the next input's tool message."""
    got = frontend_waits(db_url, (emitted / f"{name}.ndjson").read_bytes())

    assert expected == [
        (
            w.verdict.state.value,
            w.verdict.facts.decision and w.verdict.facts.decision.value,
            w.verdict.uncertain,
        )
        for w in got
    ]


@pytest.mark.parametrize("name", ["strands-frontend-tool-approve", "pydantic-ai-frontend-tool"])
def test_a_frontend_call_nobody_answers_keeps_waiting(
    emitted: Path, db_url: str, name: str
) -> None:
    got = frontend_waits(db_url, first_run((emitted / f"{name}.ndjson").read_bytes()))

    assert [("WAITING", "frontend_tool")] == [
        (w.verdict.state.value, w.evidence.reason) for w in got
    ]
