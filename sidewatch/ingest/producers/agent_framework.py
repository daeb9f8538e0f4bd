"""Microsoft Agent Framework (agent-framework-ag-ui): an approval's 1.0 interrupt carries
`metadata.agent_framework.type: "function_approval_request"`, and Agent Framework reports every
approved call it runs with a `TOOL_CALL_RESULT`: for such a wait that result is the receipt, as
for ADK. Its synthetic `confirm_changes` call repeats the gated call (read by `frontend`)."""

from __future__ import annotations

from typing import Any

import orjson

from sidewatch.ingest.producers.base import Dialect, Gate

MAF_APPROVAL = "function_approval_request"
MAF_CONFIRM = "confirm_changes"


def is_maf_approval(meta: dict[str, Any]) -> bool:
    """A 1.0 interrupt's metadata of an Agent Framework tool approval."""
    af = meta.get("agent_framework")
    return isinstance(af, dict) and af.get("type") == MAF_APPROVAL


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


class AgentFramework(Dialect):
    """An approval is consumed by the gated call's result."""

    def gate(self, thread: str, tool_call_id: str | None, meta: dict[str, Any]) -> Gate | None:
        return Gate(None, receipt=True) if is_maf_approval(meta) else None
