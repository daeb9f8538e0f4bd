"""What Microsoft Agent Framework (agent-framework-ag-ui 1.7.0) and ag-ui-crewai 1.0.0 send,
captured by tests/producers/capture_maf.py and capture_crewai.py (see
tests/fixtures/producers/README.md), ingested as one unit each, and the verdicts it gives."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from sidewatch.app.audit import Audited, audit
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.core.assemble import assemble
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store
from sidewatch.tap.reduce import reduce_event, reduce_input
from tests.ingest.test_producers import NOW, QUIET, verdicts_of

PRODUCERS = Path(__file__).resolve().parents[1] / "fixtures" / "producers"

# file -> [(state, decision, uncertain)] of its waits, in the order they were requested
MAF = {
    # each approval is announced three times (CUSTOM function_approval_request, a synthetic
    # confirm_changes tool call, the 1.0 outcome): one wait
    "maf-approve": [("RESUMED", "accept", False)],
    "maf-approve-accepted-alias": [("RESUMED", "accept", False)],
    "maf-decline-accepted-alias": [("CLOSED_BY_DECLINE", "decline", False)],
    "maf-approve-edited-args": [("RESUMED", "accept", False)],
    "maf-decline": [("CLOSED_BY_DECLINE", "decline", False)],
    "maf-cancel": [("CANCELLED", "cancel", False)],
    "maf-two-approve": [("RESUMED", "accept", False)] * 2,
    # refused: RUN_ERROR APPROVAL_RESUME_NOT_FOUND; the wait still waits for its answer
    "maf-wrong-id": [("WAITING", None, False)],
    # refused: RUN_ERROR APPROVAL_RESUME_REQUIRED
    "maf-new-message-no-resume": [("WAITING", None, False)],
    "maf-answered-by-tool-message": [("WAITING", None, False)],
    # request_info under the workflow's own id: "no" declines, the id asked again is a new wait
    "maf-workflow-request-info": [
        ("CLOSED_BY_DECLINE", "decline", False),
        ("RESUMED", "accept", False),
    ],
    # a run without an answer is refused (WORKFLOW_RESUME_REQUIRED); the next one answers
    "maf-workflow-asks-again": [("RESUMED", "accept", False)],
    # Agent Framework drops the approved call when the other one is rejected in the same
    # resume, and re-asks the rejected one under its id in a run that ends with a new
    # interrupt outcome: it reports every approved call it runs, so the approval without its
    # result was dropped
    "maf-two-approve-reject": [
        ("STUCK_AFTER_DECISION", "accept", False),
        ("CLOSED_BY_DECLINE", "decline", False),
        ("WAITING", None, False),
    ],
}

CREWAI = {
    "crewai-approve-default": [("RESUMED", "accept", False)],
    "crewai-approve-outcome": [("RESUMED", "accept", False)],
    "crewai-decline-default": [("CLOSED_BY_DECLINE", "decline", False)],
    # the step's own outcome names, from responseSchema.enum
    "crewai-own-label-approved": [("RESUMED", "accept", False)],
    "crewai-own-label-refused": [("CLOSED_BY_DECLINE", "decline", False)],
    # what the person said; crewai ran the first outcome anyway (a finding, below)
    "crewai-cancel-default": [("CANCELLED", "cancel", False)],
    "crewai-cancel-outcome": [("CANCELLED", "cancel", False)],
    # crewai does not check the id: the lone answer is the lone wait's
    "crewai-wrong-id": [("CLOSED_BY_DECLINE", "decline", True)],
    # only the first entry is used; the second names nothing
    "crewai-two-entries": [("CLOSED_BY_DECLINE", "decline", False)],
    # both pauses are named by the thread id
    "crewai-two-pauses": [("RESUMED", "accept", False)] * 2,
    # the new message restarts the flow, which pauses again under the same id: one wait
    "crewai-new-message-no-resume": [("WAITING", None, False)],
}


def _verdicts(db_url: str, name: str) -> list[tuple[str, str | None, bool]]:
    return verdicts_of(db_url, (PRODUCERS / f"{name}.ndjson").read_bytes())


def _waits(db_url: str, name: str) -> list[Audited]:
    engine = open_store(db_url)
    store = Store(engine)
    body = (PRODUCERS / f"{name}.ndjson").read_bytes()
    Ingest(store, ref_protector(engine, Config()), Config()).body(name, body, NOW - 60_000)
    waits = audit(store, (QUIET,), NOW)
    engine.dispose()
    return waits


@pytest.mark.parametrize(("name", "expected"), MAF.items(), ids=list(MAF))
def test_agent_framework_streams_get_the_verdicts_of_what_happened(
    db_url: str, name: str, expected: list[tuple[str, str | None, bool]]
) -> None:
    assert expected == _verdicts(db_url, name)


@pytest.mark.parametrize(("name", "expected"), CREWAI.items(), ids=list(CREWAI))
def test_crewai_streams_get_the_verdicts_of_what_happened(
    db_url: str, name: str, expected: list[tuple[str, str | None, bool]]
) -> None:
    assert expected == _verdicts(db_url, name)


def test_an_agent_framework_approval_is_the_gated_call_not_confirm_changes(db_url: str) -> None:
    (wait,) = _waits(db_url, "maf-approve")

    ev = wait.evidence
    assert ("delete_file", "tool_call", "call_del_1") == (ev.action, ev.reason, ev.tool_call_id)
    assert ev.interrupt_id.startswith("af-call-")


def test_a_workflow_request_asked_again_under_its_own_id_is_a_new_wait(db_url: str) -> None:
    waits = _waits(db_url, "maf-workflow-request-info")

    got = [(w.evidence.request_id, w.evidence.reason) for w in waits]
    assert [
        ("thread-maf-workflow/review-purge", "input_required"),
        ("thread-maf-workflow/review-purge@run-2", "input_required"),
    ] == got


def test_every_crewai_pause_of_a_thread_is_named_by_the_thread_id(db_url: str) -> None:
    waits = _waits(db_url, "crewai-two-pauses")

    got = [(w.evidence.interrupt_id, w.evidence.reason) for w in waits]
    assert [("thread-crewai-two-pauses", "crewai:human_feedback")] * 2 == got


FINDINGS = {
    # AG-UI 1.0: a run that stops for an interrupt ends with the interrupt outcome
    "crewai-approve-default": [("interrupt_reported_as_success",)],
    "crewai-approve-outcome": [()],
    # AG-UI 1.0: a cancelled interrupt is not resolved; crewai runs its first outcome
    "crewai-cancel-default": [("interrupt_reported_as_success", "cancel_runs_first_outcome")],
    "crewai-cancel-outcome": [("cancel_runs_first_outcome",)],
    "crewai-two-pauses": [("interrupt_reported_as_success",)] * 2,
    "crewai-new-message-no-resume": [
        ("interrupt_reported_as_success", "run_ignores_open_interrupt")
    ],
    # Agent Framework refuses a run that does not answer its pending approval
    "maf-new-message-no-resume": [("run_ignores_open_interrupt",)],
    "maf-approve": [()],
}


@pytest.mark.parametrize(("name", "expected"), FINDINGS.items(), ids=list(FINDINGS))
def test_where_a_producer_breaks_ag_ui_1_0_the_wait_says_which_rule(
    db_url: str, name: str, expected: list[tuple[str, ...]]
) -> None:
    got = [w.verdict.findings for w in _waits(db_url, name)]

    assert expected == got


def test_a_second_crewai_resume_entry_is_a_thread_finding(db_url: str) -> None:
    engine = open_store(db_url)
    store = Store(engine)
    body = (PRODUCERS / "crewai-two-entries.ndjson").read_bytes()
    Ingest(store, ref_protector(engine, Config()), Config()).body("crewai", body, NOW - 60_000)

    (thread,) = store.threads()
    found = assemble(thread, lambda action, reason: QUIET).findings
    engine.dispose()

    assert ["answer_unknown_interrupt"] == [f.rule for f in found]


# What the captures carry that is content: messages, arguments, step outputs, answer labels.
CONTENT = {
    "crewai-own-label-refused": [b"Purge the cache?", b"purge the cache", b"purge_refused"],
    "maf-approve-edited-args": [b"/tmp/demo.txt", b"/tmp/other.txt", b"Please delete"],
    "maf-workflow-request-info": [b"Purge the cache?", b"Really not?"],
}


@pytest.mark.parametrize(("name", "secrets"), CONTENT.items(), ids=list(CONTENT))
def test_a_producer_wait_is_stored_by_its_ids_without_its_content(
    tmp_path: Path, name: str, secrets: list[bytes]
) -> None:
    db = tmp_path / "sidewatch.db"
    (wait, *_) = _waits(f"sqlite:///{db}", name)

    assert wait.evidence.interrupt_id in (PRODUCERS / f"{name}.ndjson").read_text()
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert [] == [s for s in secrets if s in stored]


def test_an_agent_framework_stream_the_tap_reduced_gets_the_same_verdicts(db_url: str) -> None:
    """The tap keeps `metadata.agent_framework.type`, which says the approved call's result
    is the receipt (and nothing else of the metadata, which repeats the arguments)."""
    body = (PRODUCERS / "maf-two-approve-reject.ndjson").read_bytes()
    sent = []
    for line in body.splitlines():
        obj = orjson.loads(line)
        out = reduce_event(obj) if "type" in obj else reduce_input(obj)
        if out is not None:
            sent.append(orjson.dumps(out))
    reduced = b"\n".join(sent)

    assert b"/tmp/a.txt" not in b"".join(s for s in sent if b"RUN_FINISHED" in s)
    assert MAF["maf-two-approve-reject"] == verdicts_of(db_url, reduced)
