"""What ag-ui-strands 1.0.2 and pydantic-ai-slim 2.68.0's AG-UI adapter send (captured, see
tests/fixtures/producers/README.md), ingested as one unit each, and the verdicts it gives."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sidewatch.app.audit import Audited, audit
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.app.read import _timeline
from sidewatch.config import Config
from sidewatch.core.facts import AnswerFact
from sidewatch.ingest.agui import VIA_EDITED, Interpreter
from sidewatch.ingest.reader import frame
from sidewatch.report.markdown import _wait as markdown_wait
from sidewatch.report.verdicts import verdict_json
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store
from tests.ingest.test_producers import NOW, QUIET, verdicts_of

PRODUCERS = Path(__file__).resolve().parents[1] / "fixtures" / "producers"
Verdicts = list[tuple[str, str | None, bool]]

# file -> [(state, decision, uncertain)] of its waits, in the order they were requested
STRANDS: dict[str, Verdicts] = {
    # every resumed run reports the gated call's TOOL_CALL_RESULT, whatever the decision
    "strands-approve": [("RESUMED", "accept", False)],
    "strands-decline": [("CLOSED_BY_DECLINE", "decline", False)],
    # a cancel reaches the tool as approved:false; the person's answer was a cancel
    "strands-cancel": [("CANCELLED", "cancel", False)],
    "strands-two-approvals": [
        ("RESUMED", "accept", False),
        ("CLOSED_BY_DECLINE", "decline", False),
    ],
    # one answer for two interrupts is refused (RUN_STARTED + RUN_ERROR PARTIAL_RESUME); the
    # next run answers both and consumes them
    "strands-partial-resume": [("RESUMED", "accept", False), ("RESUMED", "accept", False)],
    # a resume naming no open interrupt is refused (INTERRUPT_RESUME_ERROR): still waiting
    "strands-wrong-id": [("WAITING", None, False)],
    # a new message while an approval is pending is refused (PENDING_INTERRUPTS)
    "strands-new-message-without-resume": [("WAITING", None, False)],
    # an interrupt raised inside a tool: no toolCallId, answered with a bare string
    "strands-generic-interrupt": [("RESUMED", "accept", False)],
    "strands-generic-interrupt-label-refused": [("CLOSED_BY_DECLINE", "decline", False)],
    # the same deterministic interrupt and call ids in two threads are two waits
    "strands-same-ids-two-threads": [
        ("RESUMED", "accept", False),
        ("CLOSED_BY_DECLINE", "decline", False),
    ],
}

PYDANTIC_AI: dict[str, Verdicts] = {
    "pydantic-ai-approve": [("RESUMED", "accept", False)],
    "pydantic-ai-decline": [("CLOSED_BY_DECLINE", "decline", False)],
    "pydantic-ai-cancel": [("CANCELLED", "cancel", False)],
    # the edited action is the approved one: a normal continuation
    "pydantic-ai-edited-args": [("RESUMED", "accept", False)],
    "pydantic-ai-two-approvals": [
        ("RESUMED", "accept", False),
        ("CLOSED_BY_DECLINE", "decline", False),
    ],
    # {confirmed: true} fails the advertised schema: RUN_ERROR, so the accept is stuck
    "pydantic-ai-schema-failure": [("STUCK_AFTER_DECISION", "accept", False)],
    "pydantic-ai-wrong-id": [("WAITING", None, False)],
    # the run succeeds and drops the pending approval (AG-UI forbids it: a finding)
    "pydantic-ai-new-message-without-resume": [("CANCELLED", None, True)],
    # answering one of two runs that one and drops the other; a later run repeating the
    # answer fails ("no unprocessed tool calls"): the first wait was settled by a run that
    # succeeded, so the repeat is a finding, not a failed continuation
    "pydantic-ai-answer-one-of-two-then-repeat": [
        ("RESUMED", "accept", False),
        ("CANCELLED", None, True),
    ],
}


def ingested_as_captured(db_url: str, body: bytes) -> list[tuple[str, str | None, bool]]:
    """(state, decision, uncertain) of every wait of one unit, in requested order. The unit
    arrives a second after the last time a producer stamped on it (NOW when it stamps none),
    and is audited a minute later."""
    stamps = [int(t) for t in re.findall(rb'"timestamp":(\d+)', body)]
    received = max([*stamps, NOW - 60_000]) + 1_000
    return verdicts_of(db_url, body, received, received + 60_000)


def _audited(db_url: str, body: bytes) -> list[Audited]:
    """Every wait of one unit, received and audited as `ingested_as_captured` does."""
    engine = open_store(db_url)
    store = Store(engine)
    stamps = [int(t) for t in re.findall(rb'"timestamp":(\d+)', body)]
    received = max([*stamps, NOW - 60_000]) + 1_000
    Ingest(store, ref_protector(engine, Config()), Config()).body("producer", body, received)
    waits = audit(store, (QUIET,), received + 60_000)
    engine.dispose()
    return waits


def _findings(db_url: str, name: str) -> list[tuple[str, ...]]:
    body = (PRODUCERS / f"{name}.ndjson").read_bytes()
    return [a.verdict.findings for a in _audited(db_url, body)]


@pytest.mark.parametrize(("name", "expected"), STRANDS.items(), ids=list(STRANDS))
def test_strands_streams_get_the_verdicts_of_what_happened(
    db_url: str, name: str, expected: Verdicts
) -> None:
    assert expected == ingested_as_captured(db_url, (PRODUCERS / f"{name}.ndjson").read_bytes())


@pytest.mark.parametrize(("name", "expected"), PYDANTIC_AI.items(), ids=list(PYDANTIC_AI))
def test_pydantic_ai_streams_get_the_verdicts_of_what_happened(
    db_url: str, name: str, expected: Verdicts
) -> None:
    assert expected == ingested_as_captured(db_url, (PRODUCERS / f"{name}.ndjson").read_bytes())


FINDINGS = {
    # refusals are RUN_STARTED + RUN_ERROR with a code
    "strands-partial-resume": [("resume_rejected",), ("run_ignores_open_interrupt",)],
    "strands-new-message-without-resume": [("run_ignores_open_interrupt",)],
    "pydantic-ai-schema-failure": [("resume_rejected",)],
    # pydantic-ai ends the run in success with the approval still open: AG-UI forbids it
    "pydantic-ai-new-message-without-resume": [
        ("run_ignores_open_interrupt", "dropped_unanswered")
    ],
    "pydantic-ai-answer-one-of-two-then-repeat": [
        ("repeated_answer_rejected",),
        ("run_ignores_open_interrupt", "dropped_unanswered"),
    ],
    "pydantic-ai-approve": [()],
    "strands-approve": [()],
}


@pytest.mark.parametrize(("name", "expected"), FINDINGS.items(), ids=list(FINDINGS))
def test_the_producers_refusals_and_broken_rules_are_findings(
    db_url: str, name: str, expected: list[tuple[str, ...]]
) -> None:
    assert expected == _findings(db_url, name)


def test_a_strands_wait_is_the_gated_call_with_its_deterministic_id(db_url: str) -> None:
    engine = open_store(db_url)
    store = Store(engine)
    body = (PRODUCERS / "strands-same-ids-two-threads.ndjson").read_bytes()
    Ingest(store, ref_protector(engine, Config()), Config()).body("strands", body, NOW - 60_000)

    waits = audit(store, (QUIET,), NOW)
    engine.dispose()

    assert [("delete_file", "tool_call", "call_del_1")] * 2 == [
        (a.evidence.action, a.evidence.reason, a.evidence.tool_call_id) for a in waits
    ]
    assert 1 == len({a.evidence.interrupt_id for a in waits})
    assert 2 == len({a.evidence.request_id for a in waits})


def test_an_untimed_input_takes_the_time_its_producer_stamped_on_its_run_start() -> None:
    body = (PRODUCERS / "pydantic-ai-approve.ndjson").read_bytes()
    lines = body.splitlines()
    started = [line for line in lines if b'"RUN_STARTED"' in line][1]
    stamp = int(re.search(rb'"timestamp":(\d+)', started).group(1))  # type: ignore[union-attr]

    result = Interpreter(stamp + 10_000, 0, lambda ref: ref).read(frame(body))

    answers = [f for f in result.facts if isinstance(f, AnswerFact)]
    assert [stamp] == [a.at for a in answers]


def test_an_answer_with_edited_arguments_says_so() -> None:
    body = (PRODUCERS / "pydantic-ai-edited-args.ndjson").read_bytes()

    result = Interpreter(NOW, 0, lambda ref: ref).read(frame(body))

    answers = [f for f in result.facts if isinstance(f, AnswerFact)]
    assert [VIA_EDITED] == [a.via for a in answers]


def _dropping(name: str, call: bytes, *, new_interrupt: bool = False) -> bytes:
    """A capture whose continuing run leaves out the TOOL_CALL_RESULT of `call` (and, with
    `new_interrupt`, ends with a new interrupt outcome instead of success)."""
    lines = (PRODUCERS / f"{name}.ndjson").read_bytes().splitlines()
    kept = [
        line
        for line in lines
        if not (b'"TOOL_CALL_RESULT"' in line and b'"toolCallId":"' + call + b'"' in line)
    ]
    assert len(kept) == len(lines) - 1
    if new_interrupt:
        interrupt = (
            b'"outcome":{"type":"interrupt","interrupts":[{"id":"int-later","reason":"tool_call"}]}'
        )
        kept[-1] = kept[-1].replace(b'"outcome":{"type":"success"}', interrupt)
        assert b"int-later" in kept[-1]
    return b"\n".join(kept) + b"\n"


@pytest.mark.parametrize("new_interrupt", [False, True], ids=["success", "new-interrupt"])
@pytest.mark.parametrize("name", ["pydantic-ai-two-approvals", "strands-two-approvals"])
def test_an_approved_call_a_continuing_run_leaves_without_its_result_is_stuck(
    db_url: str, name: str, new_interrupt: bool
) -> None:
    body = _dropping(name, b"call_del_a", new_interrupt=new_interrupt)

    got = ingested_as_captured(db_url, body)

    expected = [("STUCK_AFTER_DECISION", "accept", False), ("CLOSED_BY_DECLINE", "decline", False)]
    assert expected + ([("WAITING", None, False)] if new_interrupt else []) == got


def test_a_dropped_approval_says_which_evidence_shows_the_drop(db_url: str) -> None:
    body = _dropping("pydantic-ai-two-approvals", b"call_del_a")
    (dropped, declined) = _audited(db_url, body)

    assert ("dropped_in_resume", None) == (
        dropped.verdict.facts.continuation_failure,
        declined.verdict.facts.continuation_failure,
    )


def test_a_lone_approval_whose_run_reports_no_result_stays_resumed(db_url: str) -> None:
    """Nothing shows that the producer reports results (LangGraph often does not): the run's
    start stays the receipt, and nothing pages."""
    body = _dropping("pydantic-ai-approve", b"call_del_1")

    assert [("RESUMED", "accept", False)] == ingested_as_captured(db_url, body)


@pytest.mark.parametrize(
    ("name", "edited"),
    [("pydantic-ai-edited-args", True), ("maf-approve-edited-args", True), ("maf-approve", False)],
)
def test_the_verdict_says_when_the_approved_action_is_the_edited_one(
    db_url: str, name: str, edited: bool
) -> None:
    (wait,) = _audited(db_url, (PRODUCERS / f"{name}.ndjson").read_bytes())

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
