"""Interrupt dialects of real producers, read into the same content-free facts as AG-UI 1.0.

ag-ui-langgraph's legacy `CUSTOM on_interrupt` carries the `interrupt()` value as a JSON
string (its id only in `rawEvent.id`); its resumes come as `forwardedProps.command.resume`.
Only names, ids, reasons, times and digests are read; messages and payloads are dropped.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

import orjson

from sidewatch.core.facts import key_hash
from sidewatch.core.model import Code
from sidewatch.ingest.bounds import id_problem
from sidewatch.ingest.digest import digest_of
from sidewatch.ingest.payload import NO_LABELS, Decision, Labels, decision_of


@dataclass(frozen=True, slots=True)
class LegacyInterrupt:
    """What an `on_interrupt` value says about the wait (never its message)."""

    interrupt_id: str | None
    reason: str | None
    tool_call_id: str | None
    expires_at: str | None
    action: str | None
    digest: str | None


def legacy_interrupt(value: Any, raw_event: Any) -> LegacyInterrupt:
    """Read an `on_interrupt` CUSTOM event: `value` (a JSON string, or already an object) and
    `rawEvent` (whose `id` is the interrupt id, when raw events are on)."""
    if isinstance(value, str):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            value = {}  # a plain string value: nothing but a message, which is not kept
    if not isinstance(value, dict):
        value = {}
    interrupt_id = raw_event.get("id") if isinstance(raw_event, dict) else None
    call = value.get("toolCallId", value.get("tool_call_id"))
    action, digest = _hitl_action(value.get("action_requests"))
    return LegacyInterrupt(
        interrupt_id=interrupt_id if isinstance(interrupt_id, str) and interrupt_id else None,
        reason=_str(value.get("reason")),
        tool_call_id=_str(call),
        expires_at=_str(value.get("expiresAt")),
        action=action,
        digest=digest,
    )


def _hitl_action(requests: Any) -> tuple[str | None, str | None]:
    """LangChain's HumanInTheLoopMiddleware: `action_requests: [{name, args, description?}]`.
    The action is the first request's name; the digest covers every request's name and args
    (descriptions left out)."""
    if not isinstance(requests, list) or not requests:
        return None, None
    named = [r for r in requests if isinstance(r, dict) and isinstance(r.get("name"), str)]
    if not named:
        return None, None
    first = named[0]["name"]
    body = {"name": first, "args": [{"name": r["name"], "args": r.get("args")} for r in named]}
    return first, digest_of(body)


@dataclass(frozen=True, slots=True)
class LegacyResume:
    """`forwardedProps.command.resume`: the whole value read as one answer, and each of its
    top-level keys (hashed: a key may be a payload's field name) with its own answer, for
    the case where it turns out to be a map keyed by interrupt id."""

    single: Code
    single_digest: str | None
    entries: tuple[tuple[str, Code, str | None], ...]  # (hash of key, code, digest)


def legacy_resume(forwarded_props: Any, labels: Labels = NO_LABELS) -> LegacyResume | None:
    if not isinstance(forwarded_props, dict):
        return None
    command = forwarded_props.get("command")
    if not isinstance(command, dict) or "resume" not in command:
        return None
    value = command["resume"]
    if isinstance(value, str):
        with contextlib.suppress(orjson.JSONDecodeError):  # else: a plain string answer
            value = orjson.loads(value)
    whole = decision_of(value, labels)
    entries: tuple[tuple[str, Code, str | None], ...] = ()
    if isinstance(value, dict):
        read = ((key_hash(str(k)), decision_of(v, labels)) for k, v in value.items())
        entries = tuple((k, d.code, d.digest) for k, d in read)
    return LegacyResume(whole.code, whole.digest, entries)


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


# --- ag-ui-adk -----------------------------------------------------------------------------
#
# A call awaiting confirmation is announced by a tool call named `adk_request_confirmation`
# whose arguments hold `originalFunctionCall {id, name, args}`; the interrupt id is the
# confirmation call's id. The answer is a `role: "tool"` message for that id with
# `{"confirmed": true|false}`, and the receipt is the TOOL_CALL_RESULT of the original call.

ADK_CONFIRMATION = "adk_request_confirmation"


@dataclass(frozen=True, slots=True)
class AdkOriginal:
    """The call a confirmation gates: its id (whose result is the receipt), name, digest."""

    call_id: str
    name: str
    digest: str


def adk_original(args_text: str) -> AdkOriginal | None:
    """From the arguments of an `adk_request_confirmation` call."""
    try:
        args = orjson.loads(args_text)
    except orjson.JSONDecodeError:
        return None
    return _original(args.get("originalFunctionCall") if isinstance(args, dict) else None)


def adk_original_of_meta(meta: dict[str, Any]) -> AdkOriginal | None:
    """From `metadata.adk.originalFunctionCall` of a 1.0 interrupt (outcome mode)."""
    adk = meta.get("adk")
    return _original(adk.get("originalFunctionCall") if isinstance(adk, dict) else None)


def _original(call: Any) -> AdkOriginal | None:
    if not isinstance(call, dict):
        return None
    call_id, name = call.get("id"), call.get("name")
    if not isinstance(call_id, str) or not isinstance(name, str):
        return None
    if id_problem(call_id) or id_problem(name):  # unfit to store: not read, like a non-string
        return None
    return AdkOriginal(call_id, name, digest_of({"name": name, "args": call.get("args", {})}))


def adk_answer(message: Any) -> tuple[str, Code] | None:
    """(confirmation id, accept|decline) of a tool message answering a confirmation; its
    content is read for `confirmed` only."""
    if getattr(message, "role", None) != "tool":
        return None
    content, call_id = getattr(message, "content", None), getattr(message, "tool_call_id", None)
    if not isinstance(content, str) or not isinstance(call_id, str) or "confirmed" not in content:
        return None
    try:
        value = orjson.loads(content)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("confirmed"), bool):
        return None
    return call_id, Code.ACCEPT if value["confirmed"] else Code.DECLINE


# --- Agent Framework (agent-framework-ag-ui) -------------------------------------------------
#
# An approval's 1.0 interrupt carries `metadata.agent_framework.type:
# "function_approval_request"`. Agent Framework reports every approved call it runs with a
# `TOOL_CALL_RESULT`, so for such a wait that result is the receipt, as for ADK.

MAF_APPROVAL = "function_approval_request"


def is_maf_approval(meta: dict[str, Any]) -> bool:
    """A 1.0 interrupt's metadata of an Agent Framework tool approval."""
    af = meta.get("agent_framework")
    return isinstance(af, dict) and af.get("type") == MAF_APPROVAL


# --- frontend tools (`waits.frontendTools`) ------------------------------------------------
#
# A run that stopped on a frontend tool call ends in success, the call left for the
# application (AG-UI 1.0's `pendingToolCallIds`, or derived from the stream); where the config
# names the tool, the call is a wait whose answer is the next input's `role: "tool"` message.
# Agent Framework's synthetic `confirm_changes` call repeats a gated call that its 1.0 outcome
# announces: a tool message for it answers that wait, named by the gated call's id.

MAF_CONFIRM = "confirm_changes"


def is_frontend_tool(name: str | None, patterns: Sequence[str]) -> bool:
    """A tool the config names as a frontend tool (glob patterns, case-sensitive, as policy
    `tools:`). ADK's confirmation call has its own reading and is never one."""
    return (
        name is not None
        and name != ADK_CONFIRMATION
        and any(fnmatchcase(name, p) for p in patterns)
    )


def history_calls(messages: Sequence[Any]) -> dict[str, tuple[str, str]]:
    """The tool calls of the assistant messages of an input's history: id -> (name,
    arguments). The arguments are read only for `gated_call_of`, then dropped."""
    out: dict[str, tuple[str, str]] = {}
    for m in messages:
        if getattr(m, "role", None) != "assistant":
            continue
        for call in getattr(m, "tool_calls", None) or ():
            fn = getattr(call, "function", None)
            name, args = getattr(fn, "name", None), getattr(fn, "arguments", None)
            if isinstance(call.id, str) and isinstance(name, str):
                out[call.id] = (name, args if isinstance(args, str) else "")
    return out


def tool_message_call(message: Any) -> str | None:
    """The call id a `role: "tool"` message answers."""
    if getattr(message, "role", None) != "tool":
        return None
    call_id = getattr(message, "tool_call_id", None)
    return call_id if isinstance(call_id, str) else None


def tool_message_decision(content: Any, labels: Labels = NO_LABELS) -> Decision:
    """A frontend call's answer by the decision rules: the content is a JSON value (an object
    with `approved`, a boolean, a quoted word) or, when it is not JSON, a bare string."""
    value = content
    if isinstance(content, str):
        with contextlib.suppress(orjson.JSONDecodeError):
            value = orjson.loads(content)
    return decision_of(value, labels)


def gated_call_of(name: str | None, args_text: str | None) -> str | None:
    """The gated call an Agent Framework `confirm_changes` call repeats (its
    `function_call_id`), else None."""
    if name != MAF_CONFIRM or not args_text:
        return None
    try:
        args = orjson.loads(args_text)
    except orjson.JSONDecodeError:
        return None
    call_id = args.get("function_call_id") if isinstance(args, dict) else None
    return call_id if isinstance(call_id, str) and call_id else None


# --- ag-ui-crewai --------------------------------------------------------------------------
#
# By default a crewai `@human_feedback` pause is announced by `CUSTOM on_interrupt` whose
# `value` is the AG-UI Interrupt *object* (`id`, `reason`, `message`, `responseSchema`,
# `metadata.crewai`), not a JSON string, with no `rawEvent`, and then a plain `RUN_FINISHED`.
# The id is the flow id, which the bridge sets to the thread id: every pause of a thread
# reuses it. Answers are the step's outcome labels (`responseSchema.enum`); a cancel is sent
# to crewai as empty feedback, which it resolves to the step's first outcome.


@dataclass(frozen=True, slots=True)
class CrewaiInterrupt:
    """What a crewai pause says about the wait, and what a cancel of it does: the decision
    its first outcome label reads as (`None`: no labels, so crewai's own default)."""

    interrupt: LegacyInterrupt
    first_outcome: Code | None


def is_crewai(value: Any, meta: Any = None) -> bool:
    """An `on_interrupt` value (or a 1.0 interrupt's metadata) of ag-ui-crewai."""
    if isinstance(value, dict):
        meta = value.get("metadata")
    return isinstance(meta, dict) and isinstance(meta.get("crewai"), dict)


def crewai_interrupt(value: Any) -> CrewaiInterrupt | None:
    """Read an `on_interrupt` whose value is the Interrupt object itself (ag-ui-crewai);
    `None` for any other value (ag-ui-langgraph's JSON string)."""
    if not isinstance(value, dict) or not is_crewai(value):
        return None
    interrupt_id = value.get("id")
    return CrewaiInterrupt(
        LegacyInterrupt(
            interrupt_id=interrupt_id if isinstance(interrupt_id, str) and interrupt_id else None,
            reason=_str(value.get("reason")),
            tool_call_id=_str(value.get("toolCallId")),
            expires_at=_str(value.get("expiresAt")),
            action=None,
            digest=None,
        ),
        first_outcome_decision(value.get("responseSchema")),
    )


def first_outcome_decision(schema: Any) -> Code | None:
    """The decision the first label of a `responseSchema.enum` reads as (the label is then
    dropped): what crewai runs on a cancel."""
    labels = schema.get("enum") if isinstance(schema, dict) else None
    if not isinstance(labels, list) or not labels or not isinstance(labels[0], str):
        return None
    return decision_of(labels[0]).code
