"""What the tap sends: only the fields sidewatch reads (docs/internals/interpretations/tap.md).

An event type sidewatch does not interpret (`RAW`, `MESSAGES_SNAPSHOT`, `STATE_*`,
`ACTIVITY_*`, text, reasoning, steps, any `CUSTOM` but `on_interrupt` and `sidewatch.*`) is not
sent, and is recognised from the head of its bytes without being parsed where the encoder put
`type` first (it always does). Of the events that are sent, content is replaced or left out:
tool results, error messages, run and subagent results, interrupt messages, subagent
descriptions. Of a `RunAgentInput`, only the
ids, the run's trace context (`traceparent`, `tracestate`: identifiers), the answers
(`resume[]`, `forwardedProps.command.resume`, ADK confirmation tool messages,
and with `frontend_tools` the tool messages of those tools) reduced to what decides them.
Tool-call arguments (and an answer's `editedArgs`) are sent: the action digest is computed
from them in the daemon, which holds them in memory only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from fnmatch import fnmatchcase
from typing import Any

from sidewatch_tap.tracing import kept

SENT = frozenset(
    {
        "RUN_STARTED",
        "RUN_FINISHED",
        "RUN_ERROR",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_CHUNK",
        "TOOL_CALL_RESULT",
        "CUSTOM",
        "SUBAGENT_STARTED",
        "SUBAGENT_FINISHED",
        "SUBAGENT_ERROR",
    }
)
# The fields kept of each sent event (threadId, runId and timestamp are kept on all).
_FIELDS: dict[str, tuple[str, ...]] = {
    "RUN_STARTED": ("parentRunId",),
    "RUN_FINISHED": (),
    "RUN_ERROR": (),
    "TOOL_CALL_START": ("toolCallId", "toolCallName", "parentMessageId"),
    "TOOL_CALL_ARGS": ("toolCallId", "delta"),
    "TOOL_CALL_END": ("toolCallId",),
    "TOOL_CALL_CHUNK": ("toolCallId", "toolCallName", "parentMessageId", "delta"),
    "TOOL_CALL_RESULT": ("toolCallId", "messageId"),
    "CUSTOM": ("name",),
    "SUBAGENT_STARTED": ("subagentRunId", "name"),
    "SUBAGENT_FINISHED": ("subagentRunId",),
    "SUBAGENT_ERROR": ("subagentRunId",),
}
_COMMON = ("type", "threadId", "runId", "timestamp")
_HEAD = re.compile(rb'\s*\{\s*"type"\s*:\s*"([A-Za-z_]{1,64})"')
# Payload fields that decide an answer (input.md, "Payload -> decision").
_BOOLS = ("approved", "confirmed", "accepted")
_WORDS = ("decision", "action", "type", "outcome")
_LEGACY_KEYS = ("reason", "toolCallId", "tool_call_id", "expiresAt")
ANSWERED = "answered"  # stands for free text: an answer that is no decision word (accept)


def skipped_by_head(data: bytes) -> bool:
    """True when the event's leading `type` names one that is never sent (no parse needed)."""
    m = _HEAD.match(data)
    return m is not None and m.group(1).decode() not in SENT


def reduce_event(
    event: dict[str, Any], frontend_tools: Sequence[str] = ()
) -> dict[str, Any] | None:
    """The event as it is sent, or None when it is not sent."""
    kind = event.get("type")
    if not isinstance(kind, str) or kind not in SENT:
        return None
    out = {k: event[k] for k in (*_COMMON, *_FIELDS[kind]) if k in event}
    if kind == "RUN_STARTED":
        kept(event, out)  # the run's trace context, added by a tee (identifiers only)
    if kind == "RUN_STARTED" and isinstance(event.get("input"), dict):
        run_input = reduce_input(event["input"], frontend_tools)
        if run_input is not None:
            out["input"] = run_input
    elif kind == "RUN_FINISHED" and isinstance(event.get("outcome"), dict):
        out["outcome"] = _outcome(event["outcome"])
    elif kind == "SUBAGENT_FINISHED" and isinstance(event.get("outcome"), dict):
        keys = ("type", "interruptIds")  # its `result` is not sent
        out["outcome"] = {k: event["outcome"][k] for k in keys if k in event["outcome"]}
    elif kind in ("RUN_ERROR", "SUBAGENT_ERROR"):
        out["message"] = ""  # required by AG-UI; the daemon reads that it is there, no more
    elif kind == "TOOL_CALL_RESULT":
        out["content"] = ""  # a result exists: that is all the daemon reads
    elif kind == "CUSTOM":
        return _custom(event, out)
    return out


def reduce_input(
    value: dict[str, Any], frontend_tools: Sequence[str] = ()
) -> dict[str, Any] | None:
    """A `RunAgentInput` with its ids and answers only; None when it is not one. With
    `frontend_tools` (the daemon's `waits.frontendTools`), also the answers to calls of those
    tools: the history's calls by id and name, and their tool messages reduced to decisions."""
    thread, run = value.get("threadId"), value.get("runId")
    if not (isinstance(thread, str) and isinstance(run, str) and "messages" in value):
        return None
    messages = _answers(value) + _frontend_answers(value, frontend_tools)
    out: dict[str, Any] = {"threadId": thread, "runId": run, "messages": messages}
    if isinstance(value.get("parentRunId"), str):
        out["parentRunId"] = value["parentRunId"]
    if isinstance(value.get("timestamp"), int):
        out["timestamp"] = value["timestamp"]
    kept(value, out)  # the run's trace context (sidewatch_tap.tracing)
    resume = value.get("resume")
    if isinstance(resume, list):
        out["resume"] = [_resume_entry(e) for e in resume if isinstance(e, dict)]
    props = value.get("forwardedProps")
    command = props.get("command") if isinstance(props, dict) else None
    if isinstance(command, dict) and "resume" in command:
        out["forwardedProps"] = {"command": {"resume": _legacy_resume(command["resume"])}}
    return out


def _answers(value: dict[str, Any]) -> list[dict[str, Any]]:
    """ADK confirmation answers: tool messages whose content is `{"confirmed": bool, …}`."""
    messages = value.get("messages")
    out = []
    for m in messages if isinstance(messages, list) else ():
        if not isinstance(m, dict) or m.get("role") != "tool":
            continue
        content = m.get("content")
        if not isinstance(content, str) or "confirmed" not in content:
            continue
        try:
            parsed = json.loads(content)
        except (ValueError, RecursionError):
            continue
        if isinstance(parsed, dict) and isinstance(parsed.get("confirmed"), bool):
            kept = {k: m[k] for k in ("id", "role", "toolCallId") if k in m}
            out.append({**kept, "content": json.dumps({"confirmed": parsed["confirmed"]})})
    return out


def _frontend_answers(value: dict[str, Any], patterns: Sequence[str]) -> list[dict[str, Any]]:
    """The calls of frontend tools in the history (id and name; of Agent Framework's
    `confirm_changes` also the gated call it repeats, never the arguments), and the tool
    messages answering them, their content reduced to what decides it."""
    messages = value.get("messages")
    if not patterns or not isinstance(messages, list):
        return []
    calls: list[dict[str, Any]] = []
    for m in messages:
        if not isinstance(m, dict) or m.get("role") != "assistant":
            continue
        for call in m.get("toolCalls") or ():
            fn = call.get("function") if isinstance(call, dict) else None
            if not isinstance(fn, dict) or not isinstance(call.get("id"), str):
                continue
            name = fn.get("name")
            if isinstance(name, str) and any(fnmatchcase(name, p) for p in patterns):
                calls.append({"id": call.get("id"), "type": "function", "function": _call(fn)})
    if not calls:
        return []
    ids = {c["id"] for c in calls}
    out: list[dict[str, Any]] = [{"id": "frontend-calls", "role": "assistant", "toolCalls": calls}]
    for m in messages:
        if isinstance(m, dict) and m.get("role") == "tool" and m.get("toolCallId") in ids:
            content = m.get("content")
            try:
                parsed = json.loads(content) if isinstance(content, str) else content
            except (ValueError, RecursionError):
                parsed = content  # a bare string: a word, a label or free text
            kept = {k: m[k] for k in ("id", "role", "toolCallId") if k in m}
            out.append({**kept, "content": json.dumps(payload(parsed))})
    return out


def _call(fn: dict[str, Any]) -> dict[str, Any]:
    """A frontend call's name; Agent Framework's `confirm_changes` keeps `function_call_id`."""
    args: Any = fn.get("arguments")
    kept = ""
    if fn.get("name") == "confirm_changes" and isinstance(args, str):
        try:
            parsed = json.loads(args)
        except (ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, dict) and isinstance(parsed.get("function_call_id"), str):
            kept = json.dumps({"function_call_id": parsed["function_call_id"]})
    return {"name": fn["name"], "arguments": kept}


def _resume_entry(entry: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: entry[k] for k in ("interruptId", "status") if k in entry}
    if "payload" in entry:
        out["payload"] = payload(entry["payload"])
    return out


def _legacy_resume(value: Any) -> Any:
    """`command.resume`: one answer, or a map of answers keyed by interrupt id."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return _word(value)
    if not isinstance(value, dict):
        return payload(value)
    out = payload(value)
    for key, entry in value.items():
        if key not in out and isinstance(key, str):
            out[key] = payload(entry)  # the key may be an interrupt id; its value an answer
    return out


def payload(value: Any) -> Any:
    """An answer's payload as far as it decides accept or decline, and no further."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return _word(value)
    if not isinstance(value, dict):
        return {}  # answered with something that is no decision: accept, as the daemon reads it
    out: dict[str, Any] = {k: value[k] for k in _BOOLS if isinstance(value.get(k), bool)}
    out.update({k: _word(value[k]) for k in _WORDS if isinstance(value.get(k), str)})
    decisions = value.get("decisions")
    if isinstance(decisions, list):
        out["decisions"] = [
            {"type": _word(d["type"])}
            for d in decisions
            if isinstance(d, dict) and isinstance(d.get("type"), str)
        ]
    if "editedArgs" in value:
        out["editedArgs"] = value["editedArgs"]  # the edited action's arguments: its digest
    if isinstance(value.get("approvedActionFingerprint"), str):
        out["approvedActionFingerprint"] = value["approvedActionFingerprint"]
    return out


def _word(text: str) -> str:
    """A decision word or label (one token) as it is; free text as `answered`."""
    token = text.strip()
    if token and len(token) <= 64 and len(token.split()) == 1:
        return token
    return ANSWERED


def _outcome(outcome: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: outcome[k] for k in ("type", "pendingToolCallIds") if k in outcome}
    interrupts = outcome.get("interrupts")
    if isinstance(interrupts, list):
        out["interrupts"] = [_interrupt(i) for i in interrupts if isinstance(i, dict)]
    return out


def _interrupt(interrupt: dict[str, Any]) -> dict[str, Any]:
    keys = ("id", "reason", "toolCallId", "expiresAt", "subagentRunId")
    out: dict[str, Any] = {k: interrupt[k] for k in keys if k in interrupt}
    meta = interrupt.get("metadata")
    if isinstance(meta, dict):
        out["metadata"] = _metadata(meta)
    return out


def _metadata(meta: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: meta[k] for k in ("requestId", "actionDigest") if k in meta}
    governance = meta.get("governance")
    if isinstance(governance, dict) and "actionFingerprint" in governance:
        out["governance"] = {"actionFingerprint": governance["actionFingerprint"]}
    adk = meta.get("adk")
    call = adk.get("originalFunctionCall") if isinstance(adk, dict) else None
    if isinstance(call, dict):
        kept = {k: call[k] for k in ("id", "name", "args") if k in call}
        out["adk"] = {"originalFunctionCall": kept}
    mastra = meta.get("mastra")  # the suspended call: its action and digest (Mastra)
    if isinstance(mastra, dict) and isinstance(mastra.get("toolName"), str):
        out["mastra"] = {k: mastra[k] for k in ("toolName", "args") if k in mastra}
    af = meta.get("agent_framework")
    if isinstance(af, dict) and af.get("type") == "function_approval_request":
        out["agent_framework"] = {"type": "function_approval_request"}  # a fixed word only
    return out


def _custom(event: dict[str, Any], out: dict[str, Any]) -> dict[str, Any] | None:
    name = event.get("name")
    if isinstance(name, str) and name.startswith("sidewatch."):
        return {**out, "value": event.get("value")}  # evidence the agent reports on purpose
    if name != "on_interrupt":
        return None
    value = event.get("value")
    parsed: Any = {}
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            parsed = {}  # a plain string value is only a message, which is not read
    elif isinstance(value, dict):
        parsed = value
    kept: dict[str, Any] = {}
    if isinstance(parsed, dict):
        kept = {k: parsed[k] for k in _LEGACY_KEYS if k in parsed}
        requests = parsed.get("action_requests")
        if isinstance(requests, list):  # LangChain HITL: the digest is over names and args
            kept["action_requests"] = [
                {k: r[k] for k in ("name", "args") if k in r}
                for r in requests
                if isinstance(r, dict)
            ]
    out["value"] = json.dumps(kept, separators=(",", ":"), default=str)
    raw = event.get("rawEvent")
    if isinstance(raw, dict) and "id" in raw:
        out["rawEvent"] = {"id": raw["id"]}
    if "subagentRunId" in event:  # ag-ui-langgraph attributes the event to its subagent
        out["subagentRunId"] = event["subagentRunId"]
    return out
