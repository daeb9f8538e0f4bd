"""Frontend-tool waits (`waits.frontendTools`, spec/input.md "Frontend-tool waits"): a run that
ends in success leaving a call of a named tool to the application is a wait; the next input's
`role: "tool"` message for it is the answer. Hand-written streams, ingested as one unit."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest

from sidewatch.app.audit import Audited, audit
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.core.model import Decision
from sidewatch.core.policy import DEFAULT_POLICY
from sidewatch.daemon.reload import reloaded
from sidewatch.ingest.digest import action_digest
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store
from tests.ingest.producers.captures import QUIET

THREAD = "thread-fe"
T0 = 1_785_083_400_000
MIN = 60_000
ARGS = '{"region": "eu", "secret": "s3cr3t-arg"}'
PATTERNS = ("confirm_*", "approve_*")
PRODUCERS = Path(__file__).resolve().parent / "fixtures"


def _line(obj: dict[str, Any]) -> bytes:
    return orjson.dumps(obj)


def _asking(
    run: str = "run-1",
    at: int = T0,
    calls: tuple[tuple[str, str], ...] = (("call-1", "confirm_purge"),),
    results: tuple[str, ...] = (),
    outcome: dict[str, Any] | None = None,
) -> list[bytes]:
    """A run that makes `calls` (id, name), reports the results of `results`, and ends in
    success (with `outcome`, else none)."""
    out = [
        _line(
            {
                "threadId": THREAD,
                "runId": run,
                "messages": [{"id": "u1", "role": "user", "content": "Purge eu."}],
                "timestamp": at,
            }
        ),
        _line({"type": "RUN_STARTED", "threadId": THREAD, "runId": run, "timestamp": at}),
    ]
    for call_id, name in calls:
        out += [
            _line({"type": "TOOL_CALL_START", "toolCallId": call_id, "toolCallName": name}),
            _line({"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": ARGS}),
            _line({"type": "TOOL_CALL_END", "toolCallId": call_id}),
        ]
    for call_id in results:
        out.append(
            _line(
                {
                    "type": "TOOL_CALL_RESULT",
                    "messageId": f"m-{call_id}",
                    "toolCallId": call_id,
                    "content": "done",
                }
            )
        )
    end: dict[str, Any] = {"type": "RUN_FINISHED", "threadId": THREAD, "runId": run}
    end["timestamp"] = at + 1_000
    if outcome is not None:
        end["outcome"] = outcome
    return [*out, _line(end)]


def _history(calls: tuple[tuple[str, str], ...]) -> list[dict[str, Any]]:
    return [
        {"id": "u1", "role": "user", "content": "Purge eu."},
        {
            "id": "a1",
            "role": "assistant",
            "toolCalls": [
                {"id": c, "type": "function", "function": {"name": n, "arguments": ARGS}}
                for c, n in calls
            ],
        },
    ]


def _answering(
    run: str,
    at: int,
    answers: tuple[tuple[str, str], ...] = (("call-1", '{"approved": true}'),),
    calls: tuple[tuple[str, str], ...] = (("call-1", "confirm_purge"),),
    end: str = "RUN_FINISHED",
) -> list[bytes]:
    """A later run whose input holds the history and a tool message per (call id, content)."""
    messages = _history(calls) + [
        {"id": f"tool-{run}-{c}", "role": "tool", "toolCallId": c, "content": content}
        for c, content in answers
    ]
    inp = {"threadId": THREAD, "runId": run, "messages": messages, "timestamp": at}
    last: dict[str, Any] = {"type": end, "threadId": THREAD, "runId": run, "timestamp": at + 500}
    if end == "RUN_ERROR":
        last = {"type": "RUN_ERROR", "message": "refused", "timestamp": at + 500}
    return [
        _line(inp),
        _line({"type": "RUN_STARTED", "threadId": THREAD, "runId": run, "timestamp": at}),
        _line(last),
    ]


def _new_message(run: str, at: int) -> list[bytes]:
    """A later run that does not answer: a new user message."""
    messages = [
        *_history((("call-1", "confirm_purge"),)),
        {"id": "u2", "role": "user", "content": "x"},
    ]
    return [
        _line({"threadId": THREAD, "runId": run, "messages": messages, "timestamp": at}),
        _line({"type": "RUN_STARTED", "threadId": THREAD, "runId": run, "timestamp": at}),
        _line({"type": "RUN_FINISHED", "threadId": THREAD, "runId": run, "timestamp": at + 500}),
    ]


def _audited(
    db_url: str,
    lines: list[bytes],
    at: int,
    patterns: tuple[str, ...] = PATTERNS,
    policy: Any = QUIET,
) -> list[Audited]:
    engine = open_store(db_url)
    store = Store(engine)
    summary = Ingest(store, ref_protector(engine, Config()), Config(frontend_tools=patterns)).body(
        "frontend", b"\n".join(lines), T0
    )
    assert () == summary.rejects
    waits = audit(store, (policy,), at)
    engine.dispose()
    return waits


def _states(waits: list[Audited]) -> list[tuple[str, str | None, bool]]:
    return [
        (
            w.verdict.state.value,
            w.verdict.facts.decision and w.verdict.facts.decision.value,
            w.verdict.uncertain,
        )
        for w in waits
    ]


def test_a_pending_call_of_a_named_tool_is_a_wait_named_by_the_call(db_url: str) -> None:
    (wait,) = _audited(db_url, _asking(), T0 + MIN)

    ev = wait.evidence
    assert (
        f"{THREAD}/call-1",
        "call-1",
        "frontend_tool",
        "confirm_purge",
        "call-1",
        action_digest("confirm_purge", ARGS),
    ) == (ev.request_id, ev.interrupt_id, ev.reason, ev.action, ev.tool_call_id, ev.digest)
    assert ("WAITING", None, False) == _states([wait])[0]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"approved": true}', ("RESUMED", "accept", False)),
        ('{"approved": false}', ("CLOSED_BY_DECLINE", "decline", False)),
        ('"rejected"', ("CLOSED_BY_DECLINE", "decline", False)),
        ("purge_refused", ("CLOSED_BY_DECLINE", "decline", False)),
        ('{"decision": "approve"}', ("RESUMED", "accept", False)),
        ("Sure, go ahead.", ("RESUMED", "accept", False)),
    ],
    ids=["approved", "not-approved", "word", "label", "decision-field", "free-text"],
)
def test_the_tool_message_is_the_answer_read_by_the_decision_rules(
    db_url: str, content: str, expected: tuple[str, str | None, bool]
) -> None:
    lines = _asking() + _answering("run-2", T0 + 2 * MIN, (("call-1", content),))

    assert [expected] == _states(_audited(db_url, lines, T0 + 3 * MIN))


def test_the_run_that_carried_the_answer_is_its_receipt(db_url: str) -> None:
    lines = _asking() + _answering("run-2", T0 + 2 * MIN)

    (wait,) = _audited(db_url, lines, T0 + 3 * MIN)

    assert (T0 + 2 * MIN, T0 + 2 * MIN) == (
        wait.verdict.facts.decided_at,
        wait.verdict.facts.receipt_at,
    )


def test_an_answer_whose_run_fails_is_stuck_after_the_decision(db_url: str) -> None:
    lines = _asking() + _answering("run-2", T0 + 2 * MIN, end="RUN_ERROR")

    (wait,) = _audited(db_url, lines, T0 + 3 * MIN)

    assert ("STUCK_AFTER_DECISION", ("resume_rejected",)) == (
        wait.verdict.state.value,
        wait.verdict.findings,
    )


def test_a_call_never_answered_waits_then_goes_the_way_of_its_thresholds(db_url: str) -> None:
    """No answer: WAITING (awaiting its route, under the default policy) until the route
    grace has passed, then UNROUTABLE, uncertain (nobody reported a route); with the evidence
    ignored it keeps waiting. A frontend call has no `expiresAt`: only a changed digest makes
    it STALE."""
    grace = DEFAULT_POLICY.thresholds.route_grace_ms
    requested = T0 + 1_000  # the run's end
    within = _audited(db_url, _asking(), requested + grace, policy=DEFAULT_POLICY)
    past = _audited(db_url, _asking(), requested + grace + 1, policy=DEFAULT_POLICY)
    quiet = _audited(db_url, _asking(), T0 + 600 * MIN)
    changed = {"threadId": THREAD, "interruptId": "call-1", "actionDigest": "sha256:" + "0" * 64}
    action = _line(
        {"type": "CUSTOM", "name": "sidewatch.action", "value": changed, "timestamp": T0 + MIN}
    )
    stale = _audited(db_url, [*_asking(), action], T0 + 5 * MIN)

    assert [("WAITING", None, False)] == _states(within)
    assert [("UNROUTABLE", None, True)] == _states(past)
    assert [("WAITING", None, False)] == _states(quiet)
    assert [("STALE", None, False)] == _states(stale)


def test_a_later_run_that_finishes_without_the_answer_moved_past_it(db_url: str) -> None:
    lines = _asking() + _new_message("run-2", T0 + 2 * MIN)

    (wait,) = _audited(db_url, lines, T0 + 3 * MIN)

    assert ("CANCELLED", True, ("decision",)) == (
        wait.verdict.state.value,
        wait.verdict.uncertain,
        tuple(m.value for m in wait.verdict.missing),
    )
    assert "dropped_unanswered" in wait.verdict.findings


def test_a_later_input_repeating_the_answer_in_its_history_is_not_a_new_answer(
    db_url: str,
) -> None:
    """run-3 repeats run-2's tool message (its history) and fails: that is not a failed
    continuation, nor a repeated answer; the wait stays RESUMED with one decision."""
    lines = (
        _asking()
        + _answering("run-2", T0 + 2 * MIN)
        + _answering("run-3", T0 + 4 * MIN, end="RUN_ERROR")
    )

    (wait,) = _audited(db_url, lines, T0 + 5 * MIN)

    decisions = [i for i in wait.evidence.items if isinstance(i, Decision)]
    assert ("RESUMED", (), ["run-2"]) == (
        wait.verdict.state.value,
        wait.verdict.findings,
        [d.run_id for d in decisions],
    )


def test_a_call_of_a_tool_not_named_is_no_wait(db_url: str) -> None:
    lines = _asking(calls=(("call-1", "lookup_weather"),)) + _answering(
        "run-2", T0 + 2 * MIN, calls=(("call-1", "lookup_weather"),)
    )

    assert [] == _audited(db_url, lines, T0 + 3 * MIN)


def test_with_no_frontend_tools_configured_no_call_is_a_wait(db_url: str) -> None:
    assert [] == _audited(db_url, _asking(), T0 + MIN, patterns=())


def test_a_call_with_its_result_in_the_run_is_not_pending(db_url: str) -> None:
    calls = (("call-1", "confirm_purge"), ("call-2", "approve_spend"))

    waits = _audited(db_url, _asking(calls=calls, results=("call-1",)), T0 + MIN)

    assert ["call-2"] == [w.evidence.interrupt_id for w in waits]


def test_pending_tool_call_ids_name_the_pending_calls(db_url: str) -> None:
    """The outcome's list is the list: a call it does not name is not pending."""
    calls = (("call-1", "confirm_purge"), ("call-2", "approve_spend"))
    outcome = {"type": "success", "pendingToolCallIds": ["call-2"]}

    waits = _audited(db_url, _asking(calls=calls, outcome=outcome), T0 + MIN)

    assert ["call-2"] == [w.evidence.interrupt_id for w in waits]


def test_pending_tool_call_ids_that_are_not_a_list_of_ids_reject_the_line(db_url: str) -> None:
    engine = open_store(db_url)
    body = b"\n".join(_asking(outcome={"type": "success", "pendingToolCallIds": "call-1"}))
    summary = Ingest(
        Store(engine), ref_protector(engine, Config()), Config(frontend_tools=PATTERNS)
    ).body("fe", body, T0)
    engine.dispose()

    assert [(6, "RUN_FINISHED: outcome.pendingToolCallIds: must be a list of tool call ids")] == [
        (r.line, r.error) for r in summary.rejects
    ]


def test_neither_the_tool_message_nor_the_arguments_are_stored(tmp_path: Path) -> None:
    lines = _asking() + _answering(
        "run-2", T0 + 2 * MIN, (("call-1", '{"approved": true, "note": "s3cr3t-answer"}'),)
    )
    (wait,) = _audited(f"sqlite:///{tmp_path / 'sidewatch.db'}", lines, T0 + 3 * MIN)

    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert "RESUMED" == wait.verdict.state.value
    assert [] == [s for s in (b"s3cr3t-answer", b"s3cr3t-arg", b"Purge eu.") if s in stored]


def test_frontend_tools_are_taken_on_a_reload() -> None:
    old, new = Config(), replace(Config(), frontend_tools=("confirm_*",))

    config, taken, refused = reloaded(old, new)

    assert (("confirm_*",), ["waits.frontendTools"], []) == (config.frontend_tools, taken, refused)


# What the real integrations do with `waits.frontendTools: ["confirm_*"]` (captured by
# tests/producers/capture_*.py; the live tests in tests/producers run the same scenarios now):
# file -> [(state, decision, uncertain)] of its waits, in the order they were requested.
FRONTEND = {
    # Strands ends the run in success without pendingToolCallIds: pending by the stream
    "strands-frontend-tool-approve": [("RESUMED", "accept", False)],
    "strands-frontend-tool-decline": [("CLOSED_BY_DECLINE", "decline", False)],
    # a new message instead of the answer: Strands reports a placeholder result ("Forwarded
    # to client") for the call and finishes; the wait was dropped unanswered
    "strands-frontend-tool-new-message": [("CANCELLED", None, True)],
    # pydantic-ai ends the run in success with pendingToolCallIds
    "pydantic-ai-frontend-tool": [("RESUMED", "accept", False)],
    "pydantic-ai-frontend-tool-decline": [("CLOSED_BY_DECLINE", "decline", False)],
    "pydantic-ai-frontend-tool-new-message": [("CANCELLED", None, True)],
}
# Agent Framework's confirm_changes repeats the approval its 1.0 outcome announces: the same
# verdicts as without frontend tools, one wait per approval ...
MAF_FRONTEND = {
    "maf-approve": [("RESUMED", "accept", False)],
    "maf-decline": [("CLOSED_BY_DECLINE", "decline", False)],
    "maf-two-approve": [("RESUMED", "accept", False)] * 2,
    "maf-two-approve-reject": [
        ("STUCK_AFTER_DECISION", "accept", False),
        ("CLOSED_BY_DECLINE", "decline", False),
        ("WAITING", None, False),
    ],
    # ... but a tool message for confirm_changes is that approval's answer now: Agent Framework
    # refuses it (RUN_ERROR APPROVAL_RESUME_REQUIRED), so the accepted wait is stuck
    "maf-answered-by-tool-message": [("STUCK_AFTER_DECISION", "accept", False)],
}


def frontend_waits(
    db_url: str, body: bytes, patterns: tuple[str, ...] = ("confirm_*",)
) -> list[Audited]:
    """Every wait of one captured unit ingested with `waits.frontendTools: patterns`, received
    a second after the last time the producer stamped (NOW when it stamps none) and audited a
    minute later (as tests/ingest/producers/captures.py does)."""
    stamps = [int(t) for t in re.findall(rb'"timestamp":(\d+)', body)]
    received = max([*stamps, T0 - MIN]) + 1_000
    engine = open_store(db_url)
    store = Store(engine)
    summary = Ingest(store, ref_protector(engine, Config()), Config(frontend_tools=patterns)).body(
        "producer", body, received
    )
    assert () == summary.rejects
    waits = audit(store, (QUIET,), received + MIN)
    engine.dispose()
    return waits


@pytest.mark.parametrize(
    ("name", "expected"), {**FRONTEND, **MAF_FRONTEND}.items(), ids=[*FRONTEND, *MAF_FRONTEND]
)
def test_a_producer_frontend_tool_gets_the_verdict_of_what_happened(
    db_url: str, name: str, expected: list[tuple[str, str | None, bool]]
) -> None:
    body = (PRODUCERS / f"{name}.ndjson").read_bytes()

    assert expected == _states(frontend_waits(db_url, body))


def test_confirm_changes_and_the_outcome_are_one_wait_the_gated_call(db_url: str) -> None:
    """Agent Framework announces the approval by its 1.0 outcome and by a `confirm_changes`
    frontend call in the same run (which ends interrupted, not in success): one wait, whose
    action is the gated call, and no wait named by the confirm_changes call."""
    body = (PRODUCERS / "maf-approve.ndjson").read_bytes()

    (wait,) = frontend_waits(db_url, body, ("confirm_*", "confirm_changes"))

    ev = wait.evidence
    assert ("delete_file", "tool_call", "call_del_1") == (ev.action, ev.reason, ev.tool_call_id)
    assert ev.interrupt_id.startswith("af-call-")


def test_a_confirm_changes_tool_message_answers_the_approval_it_repeats(db_url: str) -> None:
    body = (PRODUCERS / "maf-answered-by-tool-message.ndjson").read_bytes()

    (wait,) = frontend_waits(db_url, body)

    assert (True, ("resume_rejected",), "accept") == (
        wait.evidence.interrupt_id.startswith("af-call-"),
        wait.verdict.findings,
        wait.verdict.facts.decision and wait.verdict.facts.decision.value,
    )
