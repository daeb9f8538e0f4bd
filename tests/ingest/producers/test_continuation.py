"""What a continuing run shows of an approved call, on real producers' captures: an approval
whose result the run leaves out is stuck, and the verdict says when the approved action is the
edited one."""

from __future__ import annotations

import pytest

from sidewatch.app.read import _timeline
from sidewatch.report.markdown import _wait as markdown_wait
from sidewatch.report.verdicts import verdict_json
from tests.ingest.producers.captures import (
    audited_as_captured,
    capture,
    dropping,
    ingested_as_captured,
)


@pytest.mark.parametrize("new_interrupt", [False, True], ids=["success", "new-interrupt"])
@pytest.mark.parametrize("name", ["pydantic-ai-two-approvals", "strands-two-approvals"])
def test_an_approved_call_a_continuing_run_leaves_without_its_result_is_stuck(
    db_url: str, name: str, new_interrupt: bool
) -> None:
    body = dropping(name, b"call_del_a", new_interrupt=new_interrupt)

    got = ingested_as_captured(db_url, body)

    expected = [("STUCK_AFTER_DECISION", "accept", False), ("CLOSED_BY_DECLINE", "decline", False)]
    assert expected + ([("WAITING", None, False)] if new_interrupt else []) == got


@pytest.mark.parametrize(
    ("name", "edited"),
    [("pydantic-ai-edited-args", True), ("maf-approve-edited-args", True), ("maf-approve", False)],
)
def test_the_verdict_says_when_the_approved_action_is_the_edited_one(
    db_url: str, name: str, edited: bool
) -> None:
    (wait,) = audited_as_captured(db_url, capture(name))

    body = verdict_json(wait.evidence, wait.verdict)
    decisions = [i for i in _timeline(wait.evidence) if i["kind"] == "decision"]
    line = "\n".join(markdown_wait(body))
    assert (edited, edited, [edited]) == (
        wait.verdict.facts.action_edited,
        body["evidence"]["actionEdited"],
        [d["edited"] for d in decisions],
    )
    assert edited == ("decision accept (of the edited action)" in line)
    assert wait.verdict.state.value == "RESUMED"
