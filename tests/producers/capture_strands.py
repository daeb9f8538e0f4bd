"""Capture what ag-ui-strands emits for tool-approval scenarios (offline, scripted fake model).

Usage: python capture_strands.py OUTDIR
Writes strands-<scenario>.ndjson files. Each line is either the RunAgentInput sent to start or
resume a run (`inp.model_dump_json(by_alias=True)`: threadId, runId, messages and no "type"),
or an AG-UI event exactly as ag_ui.encoder.EventEncoder writes it (the SSE `data:` payload).
A resume's `messages` is the last MESSAGES_SNAPSHOT the client received, plus its new text.
The adapter is `StrandsAgent` with `ToolBehavior(interrupt_on_call=True)` for the gated tools,
the way its README gates a server tool; a tool that calls `tool_context.interrupt()` itself is
the generic case.
"""

import asyncio
import json
import logging
import sys
from pathlib import Path

from ag_ui.core import RunAgentInput
from ag_ui.encoder import EventEncoder
from ag_ui_strands import StrandsAgent, StrandsAgentConfig, ToolBehavior
from strands import Agent, ToolContext, tool
from strands.models.model import Model

ENCODER = EventEncoder()
logging.disable(logging.WARNING)  # the adapter logs dropped RAW events; not what is captured


class ScriptedModel(Model):
    """No-network fake model: the latest message holds tool results -> a short text; else the
    tool calls in `calls` (once), then text."""

    def __init__(self, calls: list[dict]):
        self.calls = calls

    def update_config(self, **model_config):
        pass

    def get_config(self):
        return {}

    async def structured_output(self, output_model, prompt, system_prompt=None, **kwargs):
        raise NotImplementedError
        yield

    async def stream(self, messages, tool_specs=None, system_prompt=None, **kwargs):
        last = messages[-1]
        answered = any("toolResult" in c for c in last["content"])
        yield {"messageStart": {"role": "assistant"}}
        if answered or not self.calls:
            yield {"contentBlockStart": {"start": {}}}
            yield {"contentBlockDelta": {"delta": {"text": "Finished the request."}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}
            return
        for c in self.calls:
            start = {"toolUse": {"toolUseId": c["id"], "name": c["name"]}}
            yield {"contentBlockStart": {"start": start}}
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(c["args"])}}}}
            yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "tool_use"}}


@tool
def delete_file(path: str) -> dict:
    """Delete a file."""
    return {"status": "deleted", "path": path}


@tool
def send_email(to: str, subject: str) -> dict:
    """Send an email."""
    return {"status": "sent", "to": to}


@tool(context=True)
def purge_cache(region: str, tool_context: ToolContext) -> str:
    """Purge a cache region, after asking a person inside the tool."""
    answer = tool_context.interrupt("purge-confirmation", reason={"region": region})
    # the adapter hands a generic interrupt's answer over as {"response": payload}
    return f"purged {region}" if answer.get("response") == "approved" else "kept"


ONE_CALL = [{"id": "call_del_1", "name": "delete_file", "args": {"path": "/tmp/demo.txt"}}]
TWO_CALLS = [
    {"id": "call_del_a", "name": "delete_file", "args": {"path": "/tmp/a.txt"}},
    {
        "id": "call_mail_b",
        "name": "send_email",
        "args": {"to": "someone@example.test", "subject": "hi"},
    },
]
PURGE = [{"id": "call_purge_1", "name": "purge_cache", "args": {"region": "eu"}}]
# A frontend tool the client declares in `tools` (CopilotKit's human-in-the-loop): Strands runs
# it as a proxy tool and ends the run in success, naming no `pendingToolCallIds`.
FRONTEND = [{"id": "call_confirm_1", "name": "confirm_purge", "args": {"region": "eu"}}]
FRONTEND_TOOL = {
    "name": "confirm_purge",
    "description": "Ask the user to confirm a purge.",
    "parameters": {"type": "object", "properties": {"region": {"type": "string"}}},
}


def make_agent(calls: list[dict]) -> StrandsAgent:
    core = Agent(
        model=ScriptedModel(calls),
        tools=[delete_file, send_email, purge_cache],
        callback_handler=None,
    )
    gated = {
        "delete_file": ToolBehavior(interrupt_on_call=True),
        "send_email": ToolBehavior(interrupt_on_call=True),
    }
    return StrandsAgent(core, name="demo_agent", config=StrandsAgentConfig(tool_behaviors=gated))


class Recorder:
    """Drives StrandsAgent.run for one thread; one Recorder may share a file with another."""

    def __init__(
        self,
        agent: StrandsAgent,
        thread_id: str,
        lines: list[str] | None = None,
        tools: list[dict] | None = None,
    ):
        self.agent = agent
        self.thread_id = thread_id
        self.tools = tools or []
        self.lines = [] if lines is None else lines
        self.run_no = 0
        self.messages: list[dict] = []
        self.interrupt_ids: list[str] = []

    async def run(self, *, user_text: str | None = None, resume=None, tool_answer=None):
        self.run_no += 1
        if user_text is not None:
            self.messages.append(
                {"id": f"user-{self.run_no}", "role": "user", "content": user_text}
            )
        if tool_answer is not None:  # the client's answer to a frontend call
            call_id, content = tool_answer
            self.messages.append(
                {
                    "id": f"tool-{self.run_no}",
                    "role": "tool",
                    "toolCallId": call_id,
                    "content": json.dumps(content),
                }
            )
        body = {
            "threadId": self.thread_id,
            "runId": f"run-{self.run_no}",
            "state": {},
            "messages": self.messages,
            "tools": self.tools,
            "context": [],
            "forwardedProps": {},
        }
        if resume is not None:
            body["resume"] = resume
        inp = RunAgentInput.model_validate(body)
        self.lines.append(inp.model_dump_json(by_alias=True))
        async for event in self.agent.run(inp):
            data = ENCODER.encode(event).removeprefix("data: ").strip()
            self.lines.append(data)
            d = json.loads(data)
            if d["type"] == "MESSAGES_SNAPSHOT":
                self.messages = d["messages"]
            elif (
                d["type"] == "RUN_FINISHED" and (d.get("outcome") or {}).get("type") == "interrupt"
            ):
                self.interrupt_ids = [i["id"] for i in d["outcome"]["interrupts"]]

    def write(self, path: Path):
        path.write_text("\n".join(self.lines) + "\n")


def resolved(interrupt_id: str, payload) -> dict:
    return {"interruptId": interrupt_id, "status": "resolved", "payload": payload}


async def main(outdir: str):
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)

    async def one(
        name: str,
        calls: list[dict],
        *answers,
        user_text="Please delete the demo file.",
        tools: list[dict] | None = None,
    ):
        """One thread: the asking run, then one run per answer (a resume list, a text, or a
        tool message)."""
        r = Recorder(make_agent(calls), f"thread-strands-{name}", tools=tools)
        await r.run(user_text=user_text)
        for answer in answers:
            if isinstance(answer, str):
                await r.run(user_text=answer)
            elif isinstance(answer, tuple):
                await r.run(tool_answer=answer)
            else:
                await r.run(resume=answer(r.interrupt_ids))
        r.write(out / f"strands-{name}.ndjson")

    await one("approve", ONE_CALL, lambda ids: [resolved(ids[0], {"approved": True})])
    await one("decline", ONE_CALL, lambda ids: [resolved(ids[0], {"approved": False})])
    await one("cancel", ONE_CALL, lambda ids: [{"interruptId": ids[0], "status": "cancelled"}])
    await one(
        "two-approvals",
        TWO_CALLS,
        lambda ids: [resolved(ids[0], {"approved": True}), resolved(ids[1], {"approved": False})],
        user_text="Delete a.txt and email someone.",
    )
    # one answer for two interrupts: refused (PARTIAL_RESUME); then both answered
    await one(
        "partial-resume",
        TWO_CALLS,
        lambda ids: [resolved(ids[0], {"approved": True})],
        lambda ids: [resolved(ids[0], {"approved": True}), resolved(ids[1], {"approved": True})],
        user_text="Delete a.txt and email someone.",
    )
    await one(
        "wrong-id",
        ONE_CALL,
        lambda ids: [resolved("v1:before_tool_call:call_other:0", {"approved": True})],
    )
    # a new message without a resume while the approval is pending: refused (PENDING_INTERRUPTS)
    await one("new-message-without-resume", ONE_CALL, "Actually, what time is it?")
    # an interrupt raised inside the tool (no toolCallId); answered with a bare value
    await one(
        "generic-interrupt",
        PURGE,
        lambda ids: [resolved(ids[0], "approved")],
        user_text="Purge the eu cache.",
    )
    # ... answered with the step's own label for no
    await one(
        "generic-interrupt-label-refused",
        PURGE,
        lambda ids: [resolved(ids[0], "purge_refused")],
        user_text="Purge the eu cache.",
    )

    # a frontend tool (declared by the client): the run ends in success without
    # pendingToolCallIds; the answer is a tool message in the next input
    for name, answer in (
        ("frontend-tool-approve", ("call_confirm_1", {"approved": True})),
        ("frontend-tool-decline", ("call_confirm_1", {"approved": False})),
        ("frontend-tool-new-message", "Actually, leave the cache alone."),
    ):
        await one(name, FRONTEND, answer, user_text="Purge the eu cache.", tools=[FRONTEND_TOOL])

    # the same deterministic ids in two threads of one stream (a tee): one approves, one declines
    lines: list[str] = []
    a = Recorder(make_agent(ONE_CALL), "thread-strands-same-ids-a", lines)
    b = Recorder(make_agent(ONE_CALL), "thread-strands-same-ids-b", lines)
    await a.run(user_text="Please delete the demo file.")
    await b.run(user_text="Please delete the demo file.")
    await a.run(resume=[resolved(a.interrupt_ids[0], {"approved": True})])
    await b.run(resume=[resolved(b.interrupt_ids[0], {"approved": False})])
    (out / "strands-same-ids-two-threads.ndjson").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "."))
