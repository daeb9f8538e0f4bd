"""ag-ui-langgraph with a deepagents-style subagent that asks for approval, driven offline now
(scripted fake models): its `SUBAGENT_*` events and the interrupt's `subagentRunId` put the
subagent in the one wait's evidence, in the 1.0 dialect and the legacy one, and the
subagent's suspension opens no wait of its own."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sidewatch.app.audit import audit
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store
from tests.ingest.producers.captures import NOW, QUIET
from tests.producers.harness import capture, first_run

SCENARIOS = {
    "langgraph-subagent-approve-resume10": ("RESUMED", "accept"),
    "langgraph-subagent-decline-legacy": ("CLOSED_BY_DECLINE", "decline"),
}


@pytest.fixture(scope="module")
def emitted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("producers")
    capture(sys.executable, "capture_langgraph_subagent.py", out)
    return out


def waits_of(db_url: str, body: bytes) -> list[tuple[str, str | None, str | None, str | None]]:
    """(state, decision, subagent name, subagent state) of every wait of one unit."""
    engine = open_store(db_url)
    store = Store(engine)
    summary = Ingest(store, ref_protector(engine, Config()), Config()).body(
        "producer", body, NOW - 60_000
    )
    waits = audit(store, (QUIET,), NOW)
    engine.dispose()
    assert () == summary.rejects
    out = []
    for a in waits:
        f, sub = a.verdict.facts, a.verdict.facts.subagent
        assert sub is not None and sub.run_id.startswith("tools:")
        out.append(
            (
                a.verdict.state.value,
                f.decision and f.decision.value,
                sub.name,
                sub.state and sub.state.value,
            )
        )
    return out


@pytest.mark.parametrize(("name", "expected"), SCENARIOS.items(), ids=list(SCENARIOS))
def test_the_subagents_wait_is_one_wait_that_names_it(
    emitted: Path, db_url: str, name: str, expected: tuple[str, str]
) -> None:
    got = waits_of(db_url, (emitted / f"{name}.ndjson").read_bytes())

    # The continuing run resumed the same invocation and finished it.
    assert [(*expected, "ops", "finished")] == got


@pytest.mark.parametrize("name", SCENARIOS)
def test_while_nobody_answers_the_subagent_is_suspended(
    emitted: Path, db_url: str, name: str
) -> None:
    got = waits_of(db_url, first_run((emitted / f"{name}.ndjson").read_bytes()))

    assert [("WAITING", None, "ops", "suspended")] == got
