"""What Microsoft Agent Framework (agent-framework-ag-ui 1.7.0) sends, captured by
tests/producers/capture_maf.py (see fixtures/README.md), ingested as one unit each, and the
verdicts it gives: an approval is consumed by the gated call's result
(sidewatch/ingest/producers/agent_framework.py)."""

from __future__ import annotations

import orjson
import pytest

from sidewatch_tap.reduce import reduce_event, reduce_input
from tests.ingest.producers.captures import audited, capture, verdicts, verdicts_of

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


@pytest.mark.parametrize(("name", "expected"), MAF.items(), ids=list(MAF))
def test_agent_framework_streams_get_the_verdicts_of_what_happened(
    db_url: str, name: str, expected: list[tuple[str, str | None, bool]]
) -> None:
    assert expected == verdicts(db_url, name)


def test_an_agent_framework_approval_is_the_gated_call_not_confirm_changes(db_url: str) -> None:
    (wait,) = audited(db_url, "maf-approve")

    ev = wait.evidence
    assert ("delete_file", "tool_call", "call_del_1") == (ev.action, ev.reason, ev.tool_call_id)
    assert ev.interrupt_id.startswith("af-call-")


def test_a_workflow_request_asked_again_under_its_own_id_is_a_new_wait(db_url: str) -> None:
    waits = audited(db_url, "maf-workflow-request-info")

    got = [(w.evidence.request_id, w.evidence.reason) for w in waits]
    assert [
        ("thread-maf-workflow/review-purge", "input_required"),
        ("thread-maf-workflow/review-purge@run-2", "input_required"),
    ] == got


FINDINGS = {
    # Agent Framework refuses a run that does not answer its pending approval
    "maf-new-message-no-resume": [("run_ignores_open_interrupt",)],
    "maf-approve": [()],
}


@pytest.mark.parametrize(("name", "expected"), FINDINGS.items(), ids=list(FINDINGS))
def test_where_a_producer_breaks_ag_ui_1_0_the_wait_says_which_rule(
    db_url: str, name: str, expected: list[tuple[str, ...]]
) -> None:
    got = [w.verdict.findings for w in audited(db_url, name)]

    assert expected == got


def test_an_agent_framework_stream_the_tap_reduced_gets_the_same_verdicts(db_url: str) -> None:
    """The tap keeps `metadata.agent_framework.type`, which says the approved call's result
    is the receipt (and nothing else of the metadata, which repeats the arguments)."""
    body = capture("maf-two-approve-reject")
    sent = []
    for line in body.splitlines():
        obj = orjson.loads(line)
        out = reduce_event(obj) if "type" in obj else reduce_input(obj)
        if out is not None:
            sent.append(orjson.dumps(out))
    reduced = b"\n".join(sent)

    assert b"/tmp/a.txt" not in b"".join(s for s in sent if b"RUN_FINISHED" in s)
    assert MAF["maf-two-approve-reject"] == verdicts_of(db_url, reduced)
