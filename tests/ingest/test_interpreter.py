"""The interpreter: one unit's lines, in order and with the unit's run context, to content-free
facts; bad lines become line-numbered rejects and never stop the unit."""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

import orjson
import pytest
import rfc8785

from sidewatch.core.assemble import assemble
from sidewatch.core.facts import (
    AnswerFact,
    Fact,
    FindingFact,
    HeartbeatFact,
    InterruptFact,
    RunFact,
    RunMark,
    ServiceBeatFact,
    ServiceBindFact,
    SignalFact,
    SignalKind,
    ThreadFacts,
    ToolCallFact,
    ToolResultFact,
)
from sidewatch.core.model import Code
from sidewatch.core.policy import DEFAULT_POLICY
from sidewatch.ingest.agui import Interpreter, UnitResult
from sidewatch.ingest.digest import RefProtector
from sidewatch.ingest.reader import frame

BASE = 1_785_081_600_000  # 2026-07-26T16:00:00Z
MIN = 60_000
RECEIVED = BASE + 60 * MIN  # when the unit arrived: the time of lines without a timestamp
SECRET = "s3cr3t-payload-do-not-echo"
PROTECT = RefProtector(b"test-key", ("role:", "policy:"))


# -- running the interpreter -------------------------------------------------------------


def interpret(*lines: dict[str, Any] | bytes, seq_base: int = 0) -> UnitResult:
    """Feed one unit's lines (line n is the n-th argument); a fact's seq is then its line."""
    interp = Interpreter(RECEIVED, seq_base, PROTECT)
    for n, line in enumerate(lines, start=1):
        interp.feed(n, line if isinstance(line, bytes) else orjson.dumps(line))
    return interp.finish()


def interpret_body(body: bytes, media_type: str | None = None) -> UnitResult:
    """A whole body, framed and read the way ingest does."""
    return Interpreter(RECEIVED, 0, PROTECT).read(frame(body, media_type))


def of(kind: type[Any], result: UnitResult) -> list[Any]:
    return [f for f in result.facts if isinstance(f, kind)]


def rejected(result: UnitResult) -> list[tuple[int, str]]:
    return [(r.line, r.reason) for r in result.rejects]


def unkeyed(fact: Any) -> Any:
    """An evidence fact without its opaque natural key, for comparison."""
    return dataclasses.replace(fact, key="")


def digest_of(name: str, args: Any) -> str:
    """The action digest, computed independently of sidewatch."""
    canonical = rfc8785.dumps({"name": name, "args": args})
    return "sha256:" + hashlib.sha256(canonical).hexdigest()


def thread_facts(thread: str, facts: list[Fact]) -> ThreadFacts:
    return ThreadFacts(
        thread_id=thread,
        interrupts=tuple(f for f in facts if isinstance(f, InterruptFact)),
        tool_calls=tuple(f for f in facts if isinstance(f, ToolCallFact)),
        runs=tuple(f for f in facts if isinstance(f, RunFact)),
        answers=tuple(f for f in facts if isinstance(f, AnswerFact)),
        tool_results=tuple(f for f in facts if isinstance(f, ToolResultFact)),
    )


# -- wire lines ------------------------------------------------------------------------


def event(type_: str, at: int | None = None, **fields: Any) -> dict[str, Any]:
    line: dict[str, Any] = {"type": type_, **fields}
    if at is not None:
        line["timestamp"] = at
    return line


def run_started(thread: str = "t1", run: str = "r1", at: int | None = None, **kw: Any) -> Any:
    return event("RUN_STARTED", at, threadId=thread, runId=run, **kw)


def run_finished(thread: str = "t1", run: str = "r1", at: int | None = None, **kw: Any) -> Any:
    return event("RUN_FINISHED", at, threadId=thread, runId=run, **kw)


def interrupted(thread: str, run: str, *interrupts: dict[str, Any], at: int | None = None) -> Any:
    return run_finished(
        thread, run, at, outcome={"type": "interrupt", "interrupts": list(interrupts)}
    )


def interrupt(interrupt_id: str, **fields: Any) -> dict[str, Any]:
    return {"id": interrupt_id, "reason": "tool_call", "message": SECRET, **fields}


def run_error(at: int | None = None, **ids: Any) -> dict[str, Any]:
    return event("RUN_ERROR", at, message=SECRET, **ids)


def run_input(thread: str, run: str, *resume: dict[str, Any], **kw: Any) -> dict[str, Any]:
    line: dict[str, Any] = {
        "threadId": thread,
        "runId": run,
        "messages": [{"id": "m1", "role": "user", "content": SECRET}],
        **kw,
    }
    if resume:
        line["resume"] = list(resume)
    return line


def resolved(interrupt_id: str, payload: Any = None) -> dict[str, Any]:
    return {"interruptId": interrupt_id, "status": "resolved", "payload": payload}


def cancelled(interrupt_id: str) -> dict[str, Any]:
    return {"interruptId": interrupt_id, "status": "cancelled"}


def tool_start(call_id: str, name: str, at: int | None = None, **ids: Any) -> dict[str, Any]:
    return event("TOOL_CALL_START", at, toolCallId=call_id, toolCallName=name, **ids)


def tool_args(call_id: str, delta: str) -> dict[str, Any]:
    return event("TOOL_CALL_ARGS", toolCallId=call_id, delta=delta)


def tool_end(call_id: str) -> dict[str, Any]:
    return event("TOOL_CALL_END", toolCallId=call_id)


def tool_result(call_id: str, at: int | None = None, **ids: Any) -> dict[str, Any]:
    return event("TOOL_CALL_RESULT", at, messageId="m9", toolCallId=call_id, content=SECRET, **ids)


def custom(name: str, value: Any, at: int | None = None) -> dict[str, Any]:
    return event("CUSTOM", at, name=name, value=value)


# -- framing ---------------------------------------------------------------------------


def test_facts_of_an_sse_body_carry_the_line_of_their_data_block() -> None:
    body = b"".join(
        b"data: " + orjson.dumps(e) + b"\n\n"
        for e in (run_started(at=BASE), run_error(at=BASE + 1))
    )

    result = interpret_body(body, "text/event-stream")
    expected = [
        RunFact(run_id="r1", thread_id="t1", mark=RunMark.STARTED, at=BASE, seq=1),
        RunFact(run_id="r1", thread_id="t1", mark=RunMark.ERROR, at=BASE + 1, seq=3),
    ]

    assert expected == result.facts


def test_irrelevant_lines_of_an_ndjson_body_are_skipped_and_keep_the_numbering() -> None:
    text = event("TEXT_MESSAGE_CONTENT", messageId="m1", delta=SECRET)
    body = b"\n".join(orjson.dumps(e) for e in (run_started(at=BASE), text, text, run_error()))

    result = interpret_body(body)
    expected = ([1, 4], 2, 2)

    assert expected == ([f.seq for f in result.facts], result.accepted, result.skipped)


def test_elements_of_a_json_array_are_numbered_for_rejects() -> None:
    body = orjson.dumps([run_started(), 42, {"no": "type"}, run_error()])

    result = interpret_body(body)
    expected = [(2, "not_object"), (3, "unknown_shape")]

    assert expected == rejected(result)


def test_a_pretty_printed_run_agent_input_is_one_input() -> None:
    body = orjson.dumps(run_input("t1", "r2", resolved("i1", True)), option=orjson.OPT_INDENT_2)

    result = interpret_body(body)
    expected = [
        RunFact(run_id="r2", thread_id="t1", mark=RunMark.INPUT, at=RECEIVED, seq=1),
        AnswerFact(
            thread_id="t1", run_id="r2", interrupt_id="i1", code=Code.ACCEPT, at=RECEIVED, seq=1
        ),
    ]

    assert expected == result.facts


# -- time and arrival order ------------------------------------------------------------


def test_a_timestamp_is_the_time_of_the_fact() -> None:
    result = interpret(run_started(at=BASE + 5))
    expected = [RunFact(run_id="r1", thread_id="t1", mark=RunMark.STARTED, at=BASE + 5, seq=1)]

    assert expected == result.facts


def test_a_line_without_a_timestamp_takes_the_time_it_was_ingested() -> None:
    result = interpret(run_started())
    expected = [RunFact(run_id="r1", thread_id="t1", mark=RunMark.STARTED, at=RECEIVED, seq=1)]

    assert expected == result.facts


def test_seq_is_the_units_base_plus_the_line_number() -> None:
    result = interpret(run_started(), run_error(), seq_base=7 << 32)
    expected = [(7 << 32) + 1, (7 << 32) + 2]

    assert expected == [f.seq for f in result.facts]


# -- run context -----------------------------------------------------------------------


def test_an_event_without_ids_belongs_to_the_run_of_the_latest_run_started() -> None:
    result = interpret(
        run_started("t1", "r1"),
        run_started("t2", "r2"),
        tool_result("call-1"),
    )
    expected = [
        ToolResultFact(thread_id="t2", run_id="r2", tool_call_id="call-1", at=RECEIVED, seq=3)
    ]

    assert expected == of(ToolResultFact, result)


def test_an_event_without_ids_belongs_to_the_run_of_the_latest_run_agent_input() -> None:
    result = interpret(
        run_started("t1", "r1"),
        run_input("t1", "r2"),
        tool_result("call-1"),
    )
    expected = [
        ToolResultFact(thread_id="t1", run_id="r2", tool_call_id="call-1", at=RECEIVED, seq=3)
    ]

    assert expected == of(ToolResultFact, result)


def test_a_tool_call_without_ids_is_attached_to_the_run_in_context() -> None:
    result = interpret(
        run_started("t1", "r1"),
        tool_start("call-1", "deploy"),
        tool_args("call-1", "{}"),
        tool_end("call-1"),
    )
    expected = ["r1"]

    assert expected == [c.run_id for c in of(ToolCallFact, result)]


def test_a_bare_run_error_after_a_run_agent_input_belongs_to_that_inputs_run() -> None:
    result = interpret(
        run_input("t1", "r2", resolved("i1", True), timestamp=BASE),
        run_error(at=BASE + 1),
    )
    expected = [
        RunFact(run_id="r2", thread_id="t1", mark=RunMark.INPUT, at=BASE, seq=1),
        RunFact(run_id="r2", thread_id="t1", mark=RunMark.ERROR, at=BASE + 1, seq=2),
    ]

    assert expected == of(RunFact, result)


def test_inline_thread_and_run_ids_name_the_run_of_a_batched_event() -> None:
    result = interpret(
        run_started("t1", "r1"),
        tool_result("call-9", threadId="t9", runId="r9"),
    )
    expected = [
        ToolResultFact(thread_id="t9", run_id="r9", tool_call_id="call-9", at=RECEIVED, seq=2)
    ]

    assert expected == of(ToolResultFact, result)


def test_inline_ids_do_not_change_the_run_context_of_later_lines() -> None:
    result = interpret(
        run_started("t1", "r1"),
        run_error(threadId="t9", runId="r9"),
        run_error(),
    )
    expected = [("t9", "r9"), ("t1", "r1")]

    assert expected == [
        (f.thread_id, f.run_id) for f in of(RunFact, result) if f.mark is RunMark.ERROR
    ]


def test_an_inline_run_id_alone_finds_its_thread_from_the_units_earlier_lines() -> None:
    result = interpret(
        run_started("t1", "r1"),
        run_started("t2", "r2"),
        run_error(runId="r1"),
    )
    expected = [RunFact(run_id="r1", thread_id="t1", mark=RunMark.ERROR, at=RECEIVED, seq=3)]

    assert expected == [f for f in of(RunFact, result) if f.mark is RunMark.ERROR]


@pytest.mark.parametrize(
    "ids",
    [
        pytest.param({"runId": "r9"}, id="run-not-seen-in-the-unit"),
        pytest.param({"threadId": "t9"}, id="another-thread"),
    ],
)
def test_an_event_that_names_another_run_is_never_given_the_run_in_context(
    ids: dict[str, str],
) -> None:
    result = interpret(run_started("t1", "r1"), run_error(**ids))
    expected: list[RunFact] = []

    assert expected == [
        f for f in of(RunFact, result) if f.mark is RunMark.ERROR and f.run_id == "r1"
    ]


def test_an_event_that_needs_a_run_and_has_none_is_rejected_with_its_line() -> None:
    result = interpret(
        run_error(),
        tool_result("call-1"),
        tool_start("call-2", "deploy"),
        run_started("t1", "r1"),
        run_error(),
    )
    expected = [(1, "no_run_context"), (2, "no_run_context"), (3, "no_run_context")]

    assert expected == rejected(result)


def test_lines_after_one_without_run_context_are_still_ingested() -> None:
    result = interpret(
        run_error(at=BASE),
        run_started("t1", "r1", at=BASE + 1),
        run_error(at=BASE + 2),
    )
    expected = [
        RunFact(run_id="r1", thread_id="t1", mark=RunMark.STARTED, at=BASE + 1, seq=2),
        RunFact(run_id="r1", thread_id="t1", mark=RunMark.ERROR, at=BASE + 2, seq=3),
    ]

    assert expected == result.facts


def test_run_context_does_not_carry_over_from_an_earlier_unit() -> None:
    interpret(run_started("t1", "r1"))

    result = interpret(run_error())
    expected = [(1, "no_run_context")]

    assert expected == rejected(result)


def test_evidence_events_need_no_run_context() -> None:
    result = interpret(
        custom("sidewatch.receipt", {"threadId": "t1", "interruptId": "i1"}, at=BASE),
    )
    expected = ([], 1)

    assert expected == (result.rejects, len(of(SignalFact, result)))


# -- runs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("outcome", "mark"),
    [
        pytest.param(None, RunMark.FINISHED, id="no-outcome"),
        pytest.param({"type": "success"}, RunMark.FINISHED, id="success"),
        pytest.param({"type": "cancelled"}, RunMark.CANCELLED, id="cancelled"),
    ],
)
def test_how_a_run_finished_is_kept(outcome: dict[str, Any] | None, mark: RunMark) -> None:
    line = (
        run_finished("t1", "r1", BASE)
        if outcome is None
        else run_finished("t1", "r1", BASE, outcome=outcome)
    )

    result = interpret(line)
    expected = [RunFact(run_id="r1", thread_id="t1", mark=mark, at=BASE, seq=1)]

    assert expected == result.facts


def test_a_run_agent_input_is_the_request_for_its_run() -> None:
    result = interpret(run_input("t1", "r2", timestamp=BASE))
    expected = [RunFact(run_id="r2", thread_id="t1", mark=RunMark.INPUT, at=BASE, seq=1)]

    assert expected == result.facts


def test_the_input_echoed_in_run_started_is_read_like_a_run_agent_input() -> None:
    echoed = run_input("t1", "r2", resolved("i1", {"approved": False}))

    result = interpret(run_started("t1", "r2", BASE, input=echoed))
    expected = [
        RunFact(run_id="r2", thread_id="t1", mark=RunMark.INPUT, at=BASE, seq=1),
        AnswerFact(
            thread_id="t1", run_id="r2", interrupt_id="i1", code=Code.DECLINE, at=BASE, seq=1
        ),
        RunFact(run_id="r2", thread_id="t1", mark=RunMark.STARTED, at=BASE, seq=1),
    ]

    assert expected == result.facts


# -- interrupts ------------------------------------------------------------------------


def test_an_interrupt_outcome_opens_one_interrupt_per_entry() -> None:
    result = interpret(
        interrupted(
            "t1",
            "r1",
            interrupt("i1", toolCallId="call-1", metadata={"requestId": "req-1"}),
            interrupt("i2", reason="input_required"),
            at=BASE,
        )
    )
    expected = [
        RunFact(run_id="r1", thread_id="t1", mark=RunMark.INTERRUPTED, at=BASE, seq=1),
        InterruptFact(
            thread_id="t1",
            run_id="r1",
            interrupt_id="i1",
            at=BASE,
            seq=1,
            reason="tool_call",
            tool_call_id="call-1",
            request_id="req-1",
        ),
        InterruptFact(
            thread_id="t1", run_id="r1", interrupt_id="i2", at=BASE, seq=1, reason="input_required"
        ),
    ]

    assert expected == result.facts


@pytest.mark.parametrize(
    ("metadata", "handle"),
    [
        pytest.param({"resumeHandle": "ckpt:t1:r1"}, True, id="handle-given"),
        pytest.param({"resumeHandle": None}, False, id="handle-null"),
        pytest.param({}, None, id="not-reported"),
    ],
)
def test_the_resume_handle_of_an_interrupt_is_read_from_its_metadata(
    metadata: dict[str, Any], handle: bool | None
) -> None:
    result = interpret(interrupted("t1", "r1", interrupt("i1", metadata=metadata)))
    expected = [handle]

    assert expected == [i.handle for i in of(InterruptFact, result)]


@pytest.mark.parametrize(
    ("expires_at", "ms"),
    [
        pytest.param("2026-07-26T18:00:00Z", BASE + 120 * MIN, id="utc-z"),
        pytest.param("2026-07-26T18:00:00+00:00", BASE + 120 * MIN, id="utc-offset"),
        pytest.param("2026-07-26T20:00:00+02:00", BASE + 120 * MIN, id="other-offset"),
        pytest.param("2026-07-26T18:00:00.250Z", BASE + 120 * MIN + 250, id="milliseconds"),
    ],
)
def test_expires_at_is_read_as_an_iso_8601_date_time(expires_at: str, ms: int) -> None:
    result = interpret(interrupted("t1", "r1", interrupt("i1", expiresAt=expires_at)))
    expected = ([ms], [])

    assert expected == (
        [i.expires_at for i in of(InterruptFact, result)],
        of(FindingFact, result),
    )


@pytest.mark.parametrize("expires_at", ["tomorrow at noon", "", "26/07/2026 18:00"])
def test_an_unparsable_expires_at_leaves_the_interrupt_unexpired(expires_at: str) -> None:
    result = interpret(interrupted("t1", "r1", interrupt("i1", expiresAt=expires_at), at=BASE))
    expected = [None]

    assert expected == [i.expires_at for i in of(InterruptFact, result)]


def test_an_unparsable_expires_at_is_a_protocol_finding() -> None:
    result = interpret(interrupted("t1", "r1", interrupt("i1", expiresAt="soon"), at=BASE))
    expected = [
        FindingFact(
            rule="expires_at_unparsable",
            at=BASE,
            seq=1,
            thread_id="t1",
            run_id="r1",
            interrupt_id="i1",
        )
    ]

    assert expected == of(FindingFact, result)


# -- action digest ---------------------------------------------------------------------


def wait_digest(*arg_deltas: str, name: str = "deploy", metadata: Any = None) -> str | None:
    """The action digest of the wait on a gated tool call whose arguments stream in as
    `arg_deltas`."""
    gated = interrupt("i1", toolCallId="call-1", metadata=metadata or {})
    result = interpret(
        run_started("t1", "r1", BASE),
        tool_start("call-1", name, BASE + 1),
        *(tool_args("call-1", delta) for delta in arg_deltas),
        tool_end("call-1"),
        interrupted("t1", "r1", gated, at=BASE + 2),
    )
    waits = assemble(thread_facts("t1", result.facts), lambda _a, _r: DEFAULT_POLICY).waits
    return waits[0].digest


def test_the_action_digest_is_sha256_of_the_canonical_name_and_args() -> None:
    args = {"target": "prod", "replicas": 3, "ratio": 1.0, "note": "café", "tags": ["b", "a"]}
    expected = digest_of("deploy", args)

    assert expected == wait_digest(
        '{"target": "prod", "replicas": 3, ',
        '"ratio": 1.0, "note": "caf\\u00e9", "tags": ["b", "a"]}',
    )


def test_the_action_digest_ignores_key_order_and_whitespace_of_the_arguments() -> None:
    expected = [digest_of("deploy", {"a": 1, "b": [1, 2]})] * 2

    assert expected == [wait_digest('{"a": 1, "b": [1, 2]}'), wait_digest('{"b":[1,2],"a":1}')]


def test_the_action_digest_changes_with_the_tool_name() -> None:
    expected = [digest_of("deploy", {}), digest_of("rollback", {})]

    assert expected == [wait_digest("{}", name="deploy"), wait_digest("{}", name="rollback")]


def test_metadata_action_digest_is_used_as_given() -> None:
    expected = "sha256:given-by-producer"

    assert expected == wait_digest("{}", metadata={"actionDigest": "sha256:given-by-producer"})


def test_metadata_governance_action_fingerprint_is_used_as_given() -> None:
    metadata = {"governance": {"actionFingerprint": "sha256:fingerprint"}}
    expected = "sha256:fingerprint"

    assert expected == wait_digest("{}", metadata=metadata)


# -- resume entries --------------------------------------------------------------------


PAYLOADS = [
    pytest.param(True, Code.ACCEPT, id="true"),
    pytest.param(False, Code.DECLINE, id="false"),
    pytest.param({"approved": True}, Code.ACCEPT, id="approved-true"),
    pytest.param({"approved": False}, Code.DECLINE, id="approved-false"),
    pytest.param({"confirmed": True}, Code.ACCEPT, id="confirmed-true"),
    pytest.param({"confirmed": False}, Code.DECLINE, id="confirmed-false"),
    *(
        pytest.param({key: word}, Code.ACCEPT, id=f"{key}-{word}")
        for key in ("decision", "action", "type")
        for word in ("approve", "approved", "accept", "accepted")
    ),
    *(
        pytest.param({key: word}, Code.DECLINE, id=f"{key}-{word}")
        for key in ("decision", "action", "type")
        for word in ("reject", "rejected", "decline", "declined", "deny", "denied")
    ),
    pytest.param({"decisions": [{"type": "approve"}]}, Code.ACCEPT, id="decisions-approve"),
    pytest.param(
        {"decisions": [{"type": "approve"}, {"type": "reject"}]},
        Code.DECLINE,
        id="decisions-any-reject",
    ),
    pytest.param({"decisions": [{"type": "edit", "args": {}}]}, Code.ACCEPT, id="decisions-edit"),
    pytest.param(None, Code.ACCEPT, id="no-payload"),
    pytest.param("sure, go ahead", Code.ACCEPT, id="a-string"),
    pytest.param(42, Code.ACCEPT, id="a-number"),
    pytest.param({"comment": "looks fine"}, Code.ACCEPT, id="other-object"),
    pytest.param({"decision": "maybe"}, Code.ACCEPT, id="unknown-word"),
]


@pytest.mark.parametrize(("payload", "code"), PAYLOADS)
def test_a_resolved_resume_entry_is_read_into_a_decision_code(payload: Any, code: Code) -> None:
    result = interpret(run_input("t1", "r2", resolved("i1", payload), timestamp=BASE))
    expected = [
        AnswerFact(thread_id="t1", run_id="r2", interrupt_id="i1", code=code, at=BASE, seq=1)
    ]

    assert expected == of(AnswerFact, result)


@pytest.mark.parametrize("payload", [True, False, {"approved": True}, None])
def test_a_cancelled_resume_entry_is_a_cancel_whatever_its_payload(payload: Any) -> None:
    entry = {**cancelled("i1"), "payload": payload}

    result = interpret(run_input("t1", "r2", entry, timestamp=BASE))
    expected = [
        AnswerFact(thread_id="t1", run_id="r2", interrupt_id="i1", code=Code.CANCEL, at=BASE, seq=1)
    ]

    assert expected == of(AnswerFact, result)


def test_every_resume_entry_answers_its_own_interrupt() -> None:
    result = interpret(
        run_input("t1", "r2", resolved("i1", True), resolved("i2", False), cancelled("i3"))
    )
    expected = [("i1", Code.ACCEPT), ("i2", Code.DECLINE), ("i3", Code.CANCEL)]

    assert expected == [(a.interrupt_id, a.code) for a in of(AnswerFact, result)]


def test_an_approval_that_names_the_fingerprint_it_approved_keeps_that_digest() -> None:
    payload = {"approved": True, "approvedActionFingerprint": "sha256:seen"}

    result = interpret(run_input("t1", "r2", resolved("i1", payload), timestamp=BASE))
    expected = [
        AnswerFact(
            thread_id="t1",
            run_id="r2",
            interrupt_id="i1",
            code=Code.ACCEPT,
            at=BASE,
            seq=1,
            digest="sha256:seen",
        )
    ]

    assert expected == of(AnswerFact, result)


def test_resume_entries_win_over_a_legacy_forwarded_command_resume() -> None:
    line = run_input(
        "t1",
        "r2",
        resolved("i1", True),
        forwardedProps={"command": {"resume": {"i1": False}}},
    )

    result = interpret(line)
    expected = [("i1", Code.ACCEPT)]

    assert expected == [(a.interrupt_id, a.code) for a in of(AnswerFact, result)]


# -- evidence events -------------------------------------------------------------------

REF = {"threadId": "t1", "interruptId": "i1"}


def test_a_route_event_is_a_notification_attempt() -> None:
    value = {**REF, "approverRef": "role:ops", "channel": "chat", "delivered": True}

    result = interpret(custom("sidewatch.route", value, BASE))
    expected = [
        SignalFact(
            kind=SignalKind.ROUTE,
            at=BASE,
            seq=1,
            request_id=None,
            thread_id="t1",
            interrupt_id="i1",
            approver_ref="role:ops",
            channel="chat",
            delivered=True,
        )
    ]

    assert expected == [unkeyed(f) for f in result.facts]


@pytest.mark.parametrize(
    "channel",
    ["a" * 65, "", "slack #ops", "<b>x</b>", "caf\N{LATIN SMALL LETTER E WITH ACUTE}", 7, ["x"]],
    ids=["too-long", "empty", "space", "markup", "non-ascii", "number", "list"],
)
def test_a_route_channel_that_is_no_code_is_kept_as_none_with_a_finding(channel: Any) -> None:
    value = {**REF, "channel": channel, "delivered": False, "error": "no approver"}

    result = interpret(custom("sidewatch.route", value, BASE))
    expected = (
        [(None, False)],
        [
            FindingFact(
                rule="route_channel_invalid", at=BASE, seq=1, thread_id="t1", interrupt_id="i1"
            )
        ],
        [],
    )

    assert expected == (
        [(f.channel, f.delivered) for f in of(SignalFact, result)],
        of(FindingFact, result),
        result.rejects,
    )


@pytest.mark.parametrize("channel", ["slack", "ag-ui", "email:oncall", "a.b_c", "x" * 64])
def test_a_route_channel_that_is_a_code_is_kept(channel: str) -> None:
    value = {**REF, "channel": channel, "delivered": True}

    result = interpret(custom("sidewatch.route", value, BASE))

    assert ([channel], []) == ([f.channel for f in of(SignalFact, result)], of(FindingFact, result))


def test_a_route_event_keeps_acknowledgement() -> None:
    value = {**REF, "approverRef": "role:ops", "delivered": True, "acknowledged": True}

    result = interpret(custom("sidewatch.route", value, BASE))
    expected = [(True, True)]

    assert expected == [(f.delivered, f.acknowledged) for f in of(SignalFact, result)]


def test_an_approver_ref_that_is_not_a_role_is_replaced_by_a_keyed_hash() -> None:
    value = {**REF, "approverRef": "alice@example.com", "delivered": True}

    result = interpret(custom("sidewatch.route", value, BASE))
    expected = ([PROTECT("alice@example.com")], False)

    assert expected == (
        [f.approver_ref for f in of(SignalFact, result)],
        "alice" in repr(result.facts),
    )


@pytest.mark.parametrize("word", ["accept", "decline", "cancel"])
def test_a_decision_event_keeps_what_the_person_did(word: str) -> None:
    value = {"requestId": "req-1", "decision": word, "actionDigest": "sha256:seen"}

    result = interpret(custom("sidewatch.decision", value, BASE))
    expected = [
        SignalFact(
            kind=SignalKind.DECISION,
            at=BASE,
            seq=1,
            request_id="req-1",
            code=Code(word),
            digest="sha256:seen",
        )
    ]

    assert expected == [unkeyed(f) for f in result.facts]


def test_an_action_event_carries_the_new_digest() -> None:
    value = {**REF, "actionDigest": "sha256:changed"}

    result = interpret(custom("sidewatch.action", value, BASE))
    expected = [
        SignalFact(
            kind=SignalKind.ACTION,
            at=BASE,
            seq=1,
            request_id=None,
            thread_id="t1",
            interrupt_id="i1",
            digest="sha256:changed",
        )
    ]

    assert expected == [unkeyed(f) for f in result.facts]


def test_a_receipt_event_names_its_wait() -> None:
    result = interpret(custom("sidewatch.receipt", {"requestId": "req-1"}, BASE))
    expected = [SignalFact(kind=SignalKind.RECEIPT, at=BASE, seq=1, request_id="req-1")]

    assert expected == [unkeyed(f) for f in result.facts]


@pytest.mark.parametrize(
    ("value", "handle"),
    [
        pytest.param({"threadId": "t1", "resumeHandle": "ckpt:t1"}, True, id="handle"),
        pytest.param({"threadId": "t1", "resumeHandle": None}, False, id="handle-null"),
        pytest.param({"threadId": "t1"}, None, id="handle-unchanged"),
    ],
)
def test_a_heartbeat_reports_the_resume_handle_only_when_it_has_the_key(
    value: dict[str, Any], handle: bool | None
) -> None:
    result = interpret(custom("sidewatch.heartbeat", value, BASE))
    expected = [HeartbeatFact(thread_id="t1", at=BASE, seq=1, run_id=None, handle=handle)]

    assert expected == [unkeyed(f) for f in result.facts]


def test_a_heartbeat_may_name_its_run() -> None:
    result = interpret(custom("sidewatch.heartbeat", {"threadId": "t1", "runId": "r1"}, BASE))
    expected = ["r1"]

    assert expected == [h.run_id for h in of(HeartbeatFact, result)]


def test_a_service_heartbeat_is_one_fact_of_the_instance_and_a_binding_names_the_thread() -> None:
    beat = {"service": "billing", "instance": "pod-1", "durable": True}
    result = interpret(
        custom("sidewatch.heartbeat", beat, BASE),
        custom("sidewatch.heartbeat", {**beat, "threadId": "t1", "runId": "r1"}, BASE + 1),
    )

    assert [
        ServiceBeatFact(service="billing", instance="pod-1", durable=True, at=BASE, seq=1),
        ServiceBindFact(
            thread_id="t1",
            run_id="r1",
            service="billing",
            instance="pod-1",
            durable=True,
            at=BASE + 1,
            seq=2,
        ),
    ] == [f if isinstance(f, ServiceBeatFact) else unkeyed(f) for f in result.facts]


def test_a_timed_evidence_event_delivered_twice_has_one_natural_key() -> None:
    line = custom("sidewatch.route", {**REF, "approverRef": "role:ops", "delivered": True}, BASE)

    first, again = interpret(line), interpret(line, seq_base=1 << 32)
    expected = [f.key for f in of(SignalFact, first)]

    assert expected == [f.key for f in of(SignalFact, again)]


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        pytest.param("sidewatch.route", ["not", "an", "object"], "invalid_field", id="not-object"),
        pytest.param("sidewatch.route", {"delivered": True}, "invalid_field", id="no-ref"),
        pytest.param(
            "sidewatch.route",
            {"threadId": "t1", "delivered": True},
            "invalid_field",
            id="thread-without-interrupt",
        ),
        pytest.param(
            "sidewatch.receipt", {"requestId": ""}, "invalid_field", id="empty-request-id"
        ),
        pytest.param("sidewatch.route", dict(REF), "invalid_field", id="route-no-delivered"),
        pytest.param(
            "sidewatch.route", {**REF, "delivered": "yes"}, "invalid_field", id="delivered-not-bool"
        ),
        pytest.param("sidewatch.decision", dict(REF), "invalid_field", id="decision-missing"),
        pytest.param(
            "sidewatch.decision", {**REF, "decision": "maybe"}, "invalid_field", id="bad-decision"
        ),
        pytest.param("sidewatch.action", dict(REF), "invalid_field", id="action-no-digest"),
        pytest.param(
            "sidewatch.heartbeat", {"resumeHandle": "h"}, "invalid_field", id="heartbeat-no-thread"
        ),
        pytest.param(
            "sidewatch.heartbeat",
            {"threadId": "t1", "resumeHandle": 7},
            "invalid_field",
            id="handle-not-string",
        ),
        pytest.param("sidewatch.unheard_of", dict(REF), "unknown_evidence", id="unknown-name"),
        pytest.param(
            "sidewatch.heartbeat",
            {"service": "s", "durable": True},
            "invalid_field",
            id="service-no-instance",
        ),
        pytest.param(
            "sidewatch.heartbeat",
            {"instance": "i", "durable": True},
            "invalid_field",
            id="instance-no-service",
        ),
        pytest.param(
            "sidewatch.heartbeat",
            {"service": "s", "instance": "i"},
            "invalid_field",
            id="service-no-durable",
        ),
        pytest.param(
            "sidewatch.heartbeat",
            {"service": "s", "instance": "i", "durable": "yes"},
            "invalid_field",
            id="durable-not-bool",
        ),
        pytest.param(
            "sidewatch.heartbeat",
            {"service": "s", "instance": "i", "durable": True, "runId": "r1"},
            "invalid_field",
            id="service-run-without-thread",
        ),
        pytest.param(
            "sidewatch.heartbeat",
            {
                "threadId": "t1",
                "service": "s",
                "instance": "i",
                "durable": True,
                "resumeHandle": "h",
            },
            "invalid_field",
            id="binding-with-handle",
        ),
    ],
)
def test_an_invalid_evidence_event_is_rejected_with_its_line(
    name: str, value: Any, reason: str
) -> None:
    result = interpret(
        custom("sidewatch.receipt", {"requestId": "req-0"}),
        custom(name, value),
        custom("sidewatch.receipt", {"requestId": "req-2"}),
    )
    expected = ([(2, reason)], ["req-0", "req-2"])

    assert expected == (
        rejected(result),
        [s.request_id for s in of(SignalFact, result)],
    )


# -- bad lines -------------------------------------------------------------------------

BAD_LINES = [
    pytest.param(b'{"type": "RUN_STARTED", "threadId": "' + SECRET.encode(), "not_json", id="cut"),
    pytest.param(SECRET.encode(), "not_json", id="plain-text"),
    pytest.param(orjson.dumps([SECRET]), "not_object", id="array"),
    pytest.param(orjson.dumps(SECRET), "not_object", id="string"),
    pytest.param(b"42", "not_object", id="number"),
    pytest.param(b"null", "not_object", id="null"),
    pytest.param(orjson.dumps({"note": SECRET}), "unknown_shape", id="no-type"),
    pytest.param(
        orjson.dumps({"threadId": "t1", "runId": "r1", "note": SECRET}),
        "unknown_shape",
        id="input-without-messages",
    ),
    pytest.param(orjson.dumps({"type": 7, "note": SECRET}), "unknown_shape", id="type-not-string"),
    pytest.param(
        orjson.dumps({"type": "NOT_AN_AGUI_EVENT", "note": SECRET}), "unknown_type", id="unknown"
    ),
    pytest.param(
        orjson.dumps({"type": "RUN_STARTED", "threadId": SECRET}),
        "invalid_field",
        id="run-started-without-run-id",
    ),
    pytest.param(
        orjson.dumps(
            {
                "type": "RUN_FINISHED",
                "threadId": "t1",
                "runId": "r1",
                "outcome": {"type": "interrupt", "interrupts": [{"message": SECRET}]},
            }
        ),
        "invalid_field",
        id="interrupt-without-id",
    ),
    pytest.param(
        orjson.dumps(
            {
                "threadId": "t1",
                "runId": "r2",
                "messages": [],
                "resume": [{"interruptId": "i1", "status": SECRET}],
            }
        ),
        "invalid_field",
        id="resume-entry-bad-status",
    ),
    pytest.param(
        orjson.dumps(
            {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1", "outcome": {"type": SECRET}}
        ),
        "invalid_field",
        id="outcome-of-unknown-type",
    ),
    pytest.param(
        orjson.dumps({"type": "TOOL_CALL_RESULT", "threadId": "t1", "runId": "r1"}),
        "invalid_field",
        id="tool-result-without-call-id",
    ),
    pytest.param(
        orjson.dumps({"type": "TOOL_CALL_ARGS", "delta": SECRET}),
        "invalid_field",
        id="tool-args-without-call-id",
    ),
    pytest.param(orjson.dumps({"type": "CUSTOM", "value": SECRET}), "invalid_field", id="no-name"),
    pytest.param(
        orjson.dumps({"type": "RUN_STARTED", "threadId": "t1", "runId": "r1", "timestamp": SECRET}),
        "invalid_field",
        id="timestamp-not-integer",
    ),
    pytest.param(
        orjson.dumps({"type": "CUSTOM", "name": "sidewatch.route", "value": {"requestId": SECRET}}),
        "invalid_field",
        id="evidence-missing-field",
    ),
]


@pytest.mark.parametrize(("line", "reason"), BAD_LINES)
def test_a_bad_line_is_rejected_with_its_line_number_and_the_rest_is_ingested(
    line: bytes, reason: str
) -> None:
    result = interpret(run_started("t1", "r1", BASE), line, run_error(at=BASE + 1))
    expected = ([(2, reason)], 2)

    assert expected == (rejected(result), result.accepted)


@pytest.mark.parametrize(("line", "reason"), BAD_LINES)
def test_the_reason_for_a_reject_is_one_line_and_never_echoes_the_line(
    line: bytes, reason: str
) -> None:
    result = interpret(line)
    expected = [(reason, False, False, True)]

    assert expected == [
        (r.reason, SECRET in r.error, "\n" in r.error, bool(r.error)) for r in result.rejects
    ]


def test_nothing_of_a_rejected_line_becomes_a_fact() -> None:
    bad = run_finished("t1", "r1", BASE, outcome={"type": "interrupt", "interrupts": [{}]})

    result = interpret(bad)
    expected = ([], [(1, "invalid_field")])

    assert expected == (result.facts, rejected(result))


def test_an_interrupt_outcome_with_no_interrupts_is_a_finding_not_a_reject() -> None:
    empty = run_finished("t1", "r1", BASE, outcome={"type": "interrupt", "interrupts": []})

    result = interpret(empty)
    expected = [
        FindingFact(
            rule="interrupt_outcome_empty",
            at=BASE,
            seq=1,
            thread_id="t1",
            run_id="r1",
            interrupt_id=None,
        )
    ]

    assert ([], expected) == (result.rejects, of(FindingFact, result))


def test_blank_lines_are_neither_facts_nor_rejects() -> None:
    result = interpret(b"", b"   ", run_started())
    expected = ([], 1, 0)

    assert expected == (result.rejects, result.accepted, result.skipped)


# -- irrelevant events -----------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        pytest.param(event("TEXT_MESSAGE_CONTENT", messageId="m1", delta=SECRET), id="text"),
        pytest.param(
            {"messageId": "m1", "delta": SECRET, "type": "TEXT_MESSAGE_CONTENT"},
            id="text-type-not-first",
        ),
        pytest.param(event("STATE_DELTA", delta=[{"op": "add"}]), id="state-delta"),
        pytest.param(event("STATE_SNAPSHOT", snapshot={"k": SECRET}), id="state-snapshot"),
        pytest.param(event("MESSAGES_SNAPSHOT", messages=[]), id="messages-snapshot"),
        pytest.param(event("RAW", event={"k": SECRET}), id="raw"),
        pytest.param(
            event("REASONING_MESSAGE_CONTENT", messageId="m1", delta=SECRET), id="reasoning"
        ),
        pytest.param(event("STEP_STARTED", stepName="plan"), id="step"),
        pytest.param(custom("on_progress", {"pct": 50}), id="other-custom"),
    ],
)
def test_an_irrelevant_event_is_counted_and_skipped(line: dict[str, Any]) -> None:
    result = interpret(line)
    expected = ([], [], 0, 1, 1)

    assert expected == (
        result.facts,
        result.rejects,
        result.accepted,
        result.skipped,
        sum(result.kinds.values()),
    )


def test_irrelevant_events_need_no_run_context() -> None:
    result = interpret(event("TEXT_MESSAGE_CONTENT", messageId="m1", delta="hi"))
    expected: list[Any] = []

    assert expected == result.rejects


def test_a_cut_line_of_an_irrelevant_event_is_skipped_unparsed() -> None:
    # Irrelevant events are "skipped without full validation" (issue 2) and are recognised by
    # the encoder's leading {"type":"..." without parsing (docs/internals/interpretations/): a cut
    # text delta carries nothing about a wait, so it is counted as skipped, not rejected.
    cut = b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"hal'

    result = interpret(cut)
    expected = ([], 1)

    assert expected == (rejected(result), result.skipped)


def test_a_cut_line_laid_out_otherwise_is_parsed_and_rejected() -> None:
    cut = b'{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "hal'

    result = interpret(cut)
    expected = [(1, "not_json")]

    assert expected == rejected(result)


def test_every_accepted_and_skipped_line_is_counted() -> None:
    result = interpret(
        run_started("t1", "r1"),
        tool_start("call-1", "deploy"),
        event("TEXT_MESSAGE_CONTENT", messageId="m1", delta="hi"),
        interrupted("t1", "r1", interrupt("i1")),
        custom("sidewatch.receipt", {"requestId": "req-1"}),
    )
    expected = (4, 1, 5)

    assert expected == (result.accepted, result.skipped, sum(result.kinds.values()))


# -- content never leaves ingest -------------------------------------------------------


def test_no_fact_holds_arguments_messages_or_payloads() -> None:
    result = interpret(
        run_input("t1", "r0", resolved("i0", {"approved": True, "note": SECRET})),
        run_started("t1", "r1"),
        tool_start("call-1", "deploy"),
        tool_args("call-1", orjson.dumps({"token": SECRET}).decode()),
        tool_end("call-1"),
        tool_result("call-0"),
        interrupted("t1", "r1", interrupt("i1", toolCallId="call-1")),
        run_error(),
    )
    expected = (False, [])

    assert expected == (SECRET in repr(result.facts), result.rejects)


@pytest.mark.parametrize(
    "line",
    [
        b'{"type":"TOOL_CALL_ARGS","delta":"x"}',
        b'{"type":"TOOL_CALL_ARGS","toolCallId":["c1"],"delta":"x"}',
        b'{"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":7}',
        b'{"type":"TOOL_CALL_ARGS","toolCallId":"c1","del',
    ],
    ids=["no-call-id", "call-id-not-a-string", "delta-not-a-string", "cut-short"],
)
def test_a_bad_argument_chunk_is_rejected_when_a_whole_unit_is_read(line: bytes) -> None:
    body = b"\n".join(
        [
            b'{"type":"RUN_STARTED","threadId":"t1","runId":"r1"}',
            b'{"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"deploy"}',
            line,
            b'{"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"{}"}',
        ]
    )

    result = interpret_body(body)

    assert [3] == [r.line for r in result.rejects]
    assert (3, 1) == (result.accepted, len(result.rejects))
