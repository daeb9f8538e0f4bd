"""What agno 3.1.10's AG-UI interface sends, captured by tests/producers/capture_agno.py (see
fixtures/README.md), ingested as one unit each, and the verdicts it gives. agno's pause is on the
wire a frontend-tool call left pending, so it is read as one: a deployment names agno's
confirmation tools in `waits.frontendTools`, and a policy for them takes the call's
`TOOL_CALL_RESULT` as the receipt (docs/internals/interpretations/producers-agno-mastra.md)."""

from __future__ import annotations

import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from sidewatch.app.audit import audit
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.config_schema import load_config
from sidewatch.core.policy import Need, ReceiptKind
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store
from tests.ingest.producers.captures import NOW, QUIET, Verdicts, capture, verdicts

DOCS = (
    Path(__file__).resolve().parents[3] / "docs/internals/interpretations/producers-agno-mastra.md"
)


def recipe() -> Config:
    """The config the interpretations give for agno: `waits.frontendTools` naming its
    confirmation tools, and a policy for them whose receipt is the call's result; every policy
    with the evidence these captures lack ignored (as `QUIET`)."""
    text = DOCS.read_text()
    section = text[text.index("**agno is read as frontend tools") :]
    block = section[section.index("```yaml") + len("```yaml") : section.index("```\n")]
    config = load_config(yaml.safe_load(textwrap.dedent(block)), {})
    quiet = {"route": Need.IGNORED, "handle": Need.IGNORED, "heartbeat": Need.IGNORED}
    return replace(config, policies=tuple(replace(p, **quiet) for p in config.policies))


AGNO = recipe()
# file -> [(state, decision, uncertain)] of its waits, in the order they were requested.
AGNO_VERDICTS = {
    "agno-approve": [("RESUMED", "accept", False)],
    "agno-decline": [("CLOSED_BY_DECLINE", "decline", False)],
    # `{"approved": true}`: agno rejected it and nothing ran, though the person approved: the
    # client's answer did not reach the tool (a continuation to investigate, not a decline)
    "agno-approve-other-shape": [("STUCK_AFTER_DECISION", "accept", False)],
    "agno-two-approvals": [("RESUMED", "accept", False), ("CLOSED_BY_DECLINE", "decline", False)],
    # a new message moved past the pause: closed provisionally, as the spec says
    "agno-new-message-no-resume": [("CANCELLED", None, True)],
    # the answered call ran, the unanswered one agno rejected unseen: dropped, as far as the
    # stream shows (and agno will not take an answer for it later: the run is no longer paused)
    "agno-two-approvals-one-answered": [("RESUMED", "accept", False), ("CANCELLED", None, True)],
    # agno refused the answer with RUN_ERROR: the call is still paused
    "agno-wrong-id": [("WAITING", None, False)],
    # a later run moved past the pause, then an answer ran the call: reopened by the late
    # answer (`answered_after_moved_past`, tests/app/test_late_answers.py)
    "agno-late-answer-after-later-run": [("RESUMED", "accept", False)],
}


def agno_verdicts(db_url: str, name: str, config: Config = AGNO) -> Verdicts:
    """The capture `name` ingested and audited a minute later under `config`."""
    engine = open_store(db_url)
    store = Store(engine)
    summary = Ingest(store, ref_protector(engine, config), config).body(
        "agno", capture(name), NOW - 60_000
    )
    waits = audit(store, config.policies, NOW)
    engine.dispose()
    assert () == summary.rejects
    return [
        (
            w.verdict.state.value,
            w.verdict.facts.decision and w.verdict.facts.decision.value,
            w.verdict.uncertain,
        )
        for w in waits
    ]


@pytest.mark.parametrize(("name", "expected"), AGNO_VERDICTS.items(), ids=list(AGNO_VERDICTS))
def test_agno_streams_get_the_verdicts_of_what_happened(
    db_url: str, name: str, expected: Verdicts
) -> None:
    assert expected == agno_verdicts(db_url, name)


def test_without_the_tool_result_receipt_an_answer_agno_rejected_would_read_resumed(
    db_url: str,
) -> None:
    """Why the policy: the run that carried `{"approved": true}` started, and by the default
    receipt that start consumed the accept."""
    frontend_only = replace(AGNO, policies=(QUIET,))

    assert [("RESUMED", "accept", False)] == agno_verdicts(
        db_url, "agno-approve-other-shape", frontend_only
    )


def test_the_recipe_names_agnos_tools_and_takes_their_result_as_the_receipt() -> None:
    agno = AGNO.policies[0]

    assert ("delete_file", "send_email") == AGNO.frontend_tools == agno.tools
    assert ReceiptKind.TOOL_RESULT == agno.receipt


def test_agno_without_frontend_tools_gives_no_wait(db_url: str) -> None:
    """Nothing in a line of agno's stream (its `RAW` events aside, which the tap does not send)
    tells its pause from a call a client runs itself."""
    assert [] == verdicts(db_url, "agno-approve")
