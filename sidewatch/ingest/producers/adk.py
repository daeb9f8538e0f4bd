"""ag-ui-adk (Google ADK): a call awaiting confirmation is announced by a tool call named
`adk_request_confirmation` whose arguments hold `originalFunctionCall {id, name, args}`; the
interrupt id is the confirmation call's id. The answer is a `role: "tool"` message for that
id with `{"confirmed": true|false}`, and the receipt is the TOOL_CALL_RESULT of the original
call. In outcome mode the 1.0 interrupt carries the original in `metadata.adk`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import orjson

from sidewatch.core.facts import VIA_TOOL_MESSAGE, AnswerFact, Fact
from sidewatch.core.model import Code
from sidewatch.ingest.bounds import id_problem
from sidewatch.ingest.digest import digest_of
from sidewatch.ingest.fields import checked
from sidewatch.ingest.producers.base import (
    Call,
    Dialect,
    Gate,
    GatedCall,
    Grammar,
    InputStage,
    RunEnd,
)

if TYPE_CHECKING:
    from ag_ui.core import RunAgentInput

ADK_CONFIRMATION = "adk_request_confirmation"


def adk_original(args_text: str) -> GatedCall | None:
    """From the arguments of an `adk_request_confirmation` call."""
    try:
        args = orjson.loads(args_text)
    except orjson.JSONDecodeError:
        return None
    return _original(args.get("originalFunctionCall") if isinstance(args, dict) else None)


def adk_original_of_meta(meta: dict[str, Any]) -> GatedCall | None:
    """From `metadata.adk.originalFunctionCall` of a 1.0 interrupt (outcome mode)."""
    adk = meta.get("adk")
    return _original(adk.get("originalFunctionCall") if isinstance(adk, dict) else None)


def _original(call: Any) -> GatedCall | None:
    if not isinstance(call, dict):
        return None
    call_id, name = call.get("id"), call.get("name")
    if not isinstance(call_id, str) or not isinstance(name, str):
        return None
    if id_problem(call_id) or id_problem(name):  # unfit to store: not read, like a non-string
        return None
    return GatedCall(call_id, name, digest_of({"name": name, "args": call.get("args", {})}))


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


class Adk(Dialect):
    """ADK's default mode announces a wait only by its confirmation tool call: at the run's
    end, every confirmation its 1.0 outcome did not announce becomes a wait."""

    input_stage = InputStage.BEFORE_RESUME

    def __init__(self) -> None:
        self._originals: dict[tuple[str, str], GatedCall] = {}  # (thread, confirmation id)
        self._pending: dict[tuple[str, str], list[tuple[str, int, int]]] = {}  # per run

    def input(
        self, g: Grammar, inp: RunAgentInput, thread: str, run: str, at: int, seq: int
    ) -> Sequence[Fact]:
        facts: list[Fact] = []
        for i, m in enumerate(inp.messages):
            answer = adk_answer(m)
            if answer is not None:  # a tool message for a confirmation call
                call_id = checked(answer[0], f"RunAgentInput: messages.{i}: toolCallId")
                facts.append(
                    AnswerFact(
                        thread_id=thread,
                        run_id=run,
                        interrupt_id=call_id,
                        code=answer[1],
                        at=at,
                        seq=seq,
                        digest=None,
                        via=VIA_TOOL_MESSAGE,
                    )
                )
        return facts

    def call_ended(self, call_id: str, call: Call, args: str) -> None:
        if call.name != ADK_CONFIRMATION:
            return
        original = adk_original(args)
        if original is not None:
            thread, run = call.thread_id, call.run_id
            self._originals[(thread, call_id)] = original
            self._pending.setdefault((thread, run), []).append((call_id, call.at, call.seq))

    def gate(self, thread: str, tool_call_id: str | None, meta: dict[str, Any]) -> Gate | None:
        """The call awaiting confirmation is the wait's action, consumed by its result."""
        original = self._originals.get((thread, tool_call_id or "")) or adk_original_of_meta(meta)
        return None if original is None else Gate(original, receipt=True)

    def run_ended(self, g: Grammar, end: RunEnd) -> bool:
        self._flush(g, end.thread, end.run, end.announced)
        return False

    def finish(self, g: Grammar) -> None:
        # A confirmation call still open is held for its END in a later unit (the grammar's).
        for thread, run in list(self._pending):
            self._flush(g, thread, run, [])

    def _flush(self, g: Grammar, thread: str, run: str, announced: list[str]) -> None:
        for call_id, at, seq in self._pending.pop((thread, run), []):
            if call_id not in announced:
                g.announce_call(thread, run, call_id, at, seq, "confirmation")
