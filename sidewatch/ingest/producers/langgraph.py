"""ag-ui-langgraph: its legacy `CUSTOM on_interrupt` carries the `interrupt()` value as a JSON
string (its id only in `rawEvent.id`; LangChain's HumanInTheLoopMiddleware puts the gated
calls in `action_requests`), and its resumes come as `forwardedProps.command.resume`.
Only names, ids, reasons, times and digests are read; messages and payloads are dropped."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from sidewatch.core.facts import Fact, LegacyResumeFact, key_hash
from sidewatch.core.model import Code
from sidewatch.ingest.bounds import DIGEST_MAX, ENTRIES_MAX, legacy_entries_json
from sidewatch.ingest.digest import digest_of
from sidewatch.ingest.fields import checked_or_none
from sidewatch.ingest.payload import NO_LABELS, Labels, decision_of
from sidewatch.ingest.producers.base import Dialect, Grammar, InputStage
from sidewatch.ingest.producers.on_interrupt import LegacyInterrupt, nonempty

if TYPE_CHECKING:
    from ag_ui.core import RunAgentInput


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
        reason=nonempty(value.get("reason")),
        tool_call_id=nonempty(call),
        expires_at=nonempty(value.get("expiresAt")),
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
    """`forwardedProps.command.resume` (a JSON string is parsed first), else None."""
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


class LangGraph(Dialect):
    """The legacy interrupt's value (the fallback reading of `on_interrupt`) and resume."""

    input_stage = InputStage.BEFORE_RESUME

    def __init__(self, labels: Labels = NO_LABELS) -> None:
        self.labels = labels

    def read_on_interrupt(self, value: Any, raw_event: Any) -> LegacyInterrupt:
        return legacy_interrupt(value, raw_event)

    def held(self, thread: str, run: str, it: LegacyInterrupt, value: Any) -> None:
        """Nothing more to keep."""

    def input(
        self, g: Grammar, inp: RunAgentInput, thread: str, run: str, at: int, seq: int
    ) -> Sequence[Fact]:
        # resume[] wins over the legacy form, as the integrations do
        legacy = None if inp.resume else legacy_resume(inp.forwarded_props, self.labels)
        if legacy is None:
            return ()
        where = "RunAgentInput: forwardedProps.command.resume: approvedActionFingerprint"
        for digest in (legacy.single_digest, *(e[2] for e in legacy.entries)):
            checked_or_none(digest, where, DIGEST_MAX)
        entries = legacy.entries
        if len(legacy_entries_json(entries)) > ENTRIES_MAX:  # hundreds of keys name no
            entries = ()  # interrupts: one answer
        return (
            LegacyResumeFact(
                thread_id=thread,
                run_id=run,
                code=legacy.single,
                at=at,
                seq=seq,
                digest=legacy.single_digest,
                entries=entries,
            ),
        )
