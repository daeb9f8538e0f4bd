"""@ag-ui/mastra (Mastra's AG-UI adapter): a tool suspended by `context.agent.suspend()` is
announced by the 1.0 outcome (and `CUSTOM on_interrupt`), reason `mastra:tool_suspend`, with
`metadata.mastra {toolName, args}`. A lone suspended call streams no `TOOL_CALL_*`: its action
is read from that metadata (the arguments digested, then dropped), and, as Mastra reports every
resumed tool with its `TOOL_CALL_RESULT`, that result is the wait's receipt."""

from __future__ import annotations

from typing import Any

from sidewatch.ingest.bounds import id_problem
from sidewatch.ingest.digest import digest_of
from sidewatch.ingest.producers.base import Dialect, Gate, GatedCall


def mastra_call(tool_call_id: str | None, meta: dict[str, Any]) -> GatedCall | None:
    """The suspended call a 1.0 interrupt's `metadata.mastra` names (with the interrupt's
    `toolCallId`), else None: its name and the digest of its arguments."""
    mastra = meta.get("mastra")
    if not isinstance(mastra, dict) or tool_call_id is None:
        return None
    name = mastra.get("toolName")
    if not isinstance(name, str) or id_problem(name):  # unfit to store: not read
        return None
    return GatedCall(tool_call_id, name, digest_of({"name": name, "args": mastra.get("args", {})}))


class Mastra(Dialect):
    """A suspension's action is the suspended call, consumed by that call's result."""

    def gate(self, thread: str, tool_call_id: str | None, meta: dict[str, Any]) -> Gate | None:
        call = mastra_call(tool_call_id, meta)
        return None if call is None else Gate(call, receipt=True)
