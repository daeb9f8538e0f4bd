"""Capture what pydantic-ai's AG-UI adapter emits for tool-approval scenarios (offline, scripted
`FunctionModel`, no network).

Usage: python capture_pydantic_ai.py OUTDIR
Writes pydantic-ai-<scenario>.ndjson files. Each line is either the RunAgentInput sent to start
or resume a run (`inp.model_dump_json(by_alias=True)`: threadId, runId, messages and no "type"),
or an AG-UI event exactly as `AGUIAdapter.encode_stream` writes it (the SSE `data:` payload).
The adapter is stateless: a resume's `messages` is the history rebuilt from the events the way
@ag-ui/client accumulates them. Tools are declared `requires_approval=True`, the agent's output
type includes `DeferredToolRequests`, as pydantic-ai's AG-UI docs show.
"""

import asyncio
import json
import sys
from pathlib import Path

from ag_ui.core import RunAgentInput
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.ui.ag_ui import AGUIAdapter

ONE_CALL = [{"id": "call_del_1", "name": "delete_file", "args": {"path": "/tmp/demo.txt"}}]
TWO_CALLS = [
    {"id": "call_del_a", "name": "delete_file", "args": {"path": "/tmp/a.txt"}},
    {
        "id": "call_mail_b",
        "name": "send_email",
        "args": {"to": "someone@example.test", "subject": "hi"},
    },
]
FRONTEND = [{"id": "call_confirm_1", "name": "confirm_purge", "args": {"region": "eu"}}]


def make_agent(calls: list[dict]) -> Agent:
    """The scripted model calls `calls` once per user turn, and answers tool results with text."""

    def answered(messages) -> bool:
        return any(isinstance(p, ToolReturnPart) for p in messages[-1].parts)

    def reply(messages, info: AgentInfo) -> ModelResponse:
        if answered(messages) or "what time" in str(getattr(messages[-1].parts[-1], "content", "")):
            return ModelResponse(parts=[TextPart("Finished the request.")])
        return ModelResponse(
            parts=[ToolCallPart(c["name"], c["args"], tool_call_id=c["id"]) for c in calls]
        )

    async def stream(messages, info: AgentInfo):
        if answered(messages) or "what time" in str(getattr(messages[-1].parts[-1], "content", "")):
            yield "Finished the request."
            return
        yield {
            n: DeltaToolCall(name=c["name"], json_args=json.dumps(c["args"]), tool_call_id=c["id"])
            for n, c in enumerate(calls)
        }

    agent = Agent(
        FunctionModel(reply, stream_function=stream), output_type=[str, DeferredToolRequests]
    )

    @agent.tool_plain(requires_approval=True)
    def delete_file(path: str) -> dict:
        """Delete a file."""
        return {"status": "deleted", "path": path}

    @agent.tool_plain(requires_approval=True)
    def send_email(to: str, subject: str) -> dict:
        """Send an email."""
        return {"status": "sent", "to": to}

    return agent


FRONTEND_TOOL = {
    "name": "confirm_purge",
    "description": "Ask the user to confirm a purge.",
    "parameters": {"type": "object", "properties": {"region": {"type": "string"}}},
}


class Recorder:
    """Drives AGUIAdapter.run_stream for one thread and keeps the client-side history."""

    def __init__(self, agent: Agent, thread_id: str, tools: list[dict] | None = None):
        self.agent = agent
        self.thread_id = thread_id
        self.tools = tools or []
        self.lines: list[str] = []
        self.run_no = 0
        self.messages: list[dict] = []
        self.interrupt_ids: list[str] = []

    def _msg(self, mid):
        return next((m for m in self.messages if m["id"] == mid), None)

    def _apply(self, d):
        t = d["type"]
        if t == "TEXT_MESSAGE_START" and not self._msg(d["messageId"]):
            self.messages.append(
                {"id": d["messageId"], "role": d.get("role", "assistant"), "content": ""}
            )
        elif t == "TEXT_MESSAGE_CONTENT":
            m = self._msg(d["messageId"])
            m["content"] = (m.get("content") or "") + d["delta"]
        elif t == "TOOL_CALL_START":
            pid = d.get("parentMessageId") or d["toolCallId"]
            m = self._msg(pid)
            if m is None:
                m = {"id": pid, "role": "assistant"}
                self.messages.append(m)
            m.setdefault("toolCalls", []).append(
                {
                    "id": d["toolCallId"],
                    "type": "function",
                    "function": {"name": d["toolCallName"], "arguments": ""},
                }
            )
        elif t == "TOOL_CALL_ARGS":
            for m in self.messages:
                for tc in m.get("toolCalls", []):
                    if tc["id"] == d["toolCallId"]:
                        tc["function"]["arguments"] += d["delta"]
        elif t == "TOOL_CALL_RESULT":
            self.messages.append(
                {
                    "id": d["messageId"],
                    "role": "tool",
                    "content": d["content"],
                    "toolCallId": d["toolCallId"],
                }
            )
        elif t == "MESSAGES_SNAPSHOT":
            self.messages = d["messages"]
        elif t == "RUN_FINISHED" and (d.get("outcome") or {}).get("type") == "interrupt":
            self.interrupt_ids = [i["id"] for i in d["outcome"]["interrupts"]]

    async def run(self, *, user_text: str | None = None, resume=None, tool_answer=None):
        self.run_no += 1
        if user_text is not None:
            self.messages.append(
                {"id": f"user-{self.run_no}", "role": "user", "content": user_text}
            )
        if tool_answer is not None:
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
            "protocolVersion": "1.0",  # a 1.0 client: pendingToolCallIds on success
        }
        if resume is not None:
            body["resume"] = resume
        inp = RunAgentInput.model_validate(body)
        self.lines.append(inp.model_dump_json(by_alias=True))
        adapter = AGUIAdapter(agent=self.agent, run_input=inp)
        async for chunk in adapter.encode_stream(adapter.run_stream()):
            for block in chunk.split("\n\n"):
                if block.startswith("data: "):
                    data = block.removeprefix("data: ").strip()
                    self.lines.append(data)
                    self._apply(json.loads(data))

    def write(self, path: Path):
        path.write_text("\n".join(self.lines) + "\n")


def resolved(interrupt_id: str, payload) -> dict:
    return {"interruptId": interrupt_id, "status": "resolved", "payload": payload}


async def main(outdir: str):
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)

    async def one(name, calls, *answers, user_text="Please delete the demo file.", tools=None):
        """One thread: the asking run, then one run per answer (a resume list, a text, or a
        tool message)."""
        r = Recorder(make_agent(calls), f"thread-pydantic-ai-{name}", tools)
        await r.run(user_text=user_text)
        for answer in answers:
            if isinstance(answer, str):
                await r.run(user_text=answer)
            elif isinstance(answer, tuple):
                await r.run(tool_answer=answer)
            else:
                await r.run(resume=answer(r.interrupt_ids))
        r.write(out / f"pydantic-ai-{name}.ndjson")

    await one("approve", ONE_CALL, lambda ids: [resolved(ids[0], {"approved": True})])
    await one("decline", ONE_CALL, lambda ids: [resolved(ids[0], {"approved": False})])
    await one("cancel", ONE_CALL, lambda ids: [{"interruptId": ids[0], "status": "cancelled"}])
    await one(
        "edited-args",
        ONE_CALL,
        lambda ids: [
            resolved(ids[0], {"approved": True, "editedArgs": {"path": "/tmp/demo-copy.txt"}})
        ],
    )
    await one(
        "two-approvals",
        TWO_CALLS,
        lambda ids: [resolved(ids[0], {"approved": True}), resolved(ids[1], {"approved": False})],
        user_text="Delete a.txt and email someone.",
    )
    # one answer for two interrupts: accepted, the other silently dropped, the run succeeds;
    # a later run repeating that answer fails ("no unprocessed tool calls")
    first = None

    def only_first(ids):
        nonlocal first
        first = [resolved(ids[0], {"approved": True})]
        return first

    await one(
        "answer-one-of-two-then-repeat",
        TWO_CALLS,
        only_first,
        lambda ids: first,
        user_text="Delete a.txt and email someone.",
    )
    # a payload that fails the advertised schema
    await one("schema-failure", ONE_CALL, lambda ids: [resolved(ids[0], {"confirmed": True})])
    await one("wrong-id", ONE_CALL, lambda ids: [resolved("int-call_other", {"approved": True})])
    # a new message without a resume: the pending approval is dropped, the run succeeds
    await one("new-message-without-resume", ONE_CALL, "Actually, what time is it?")
    # a frontend tool: the run ends in success with pendingToolCallIds; answered by a tool message
    await one(
        "frontend-tool",
        FRONTEND,
        ("call_confirm_1", {"approved": True}),
        user_text="Purge the eu cache.",
        tools=[FRONTEND_TOOL],
    )
    await one(
        "frontend-tool-decline",
        FRONTEND,
        ("call_confirm_1", {"approved": False}),
        user_text="Purge the eu cache.",
        tools=[FRONTEND_TOOL],
    )
    # a new message instead of the answer: the pending call is dropped
    await one(
        "frontend-tool-new-message",
        FRONTEND,
        "Actually, what time is it?",
        user_text="Purge the eu cache.",
        tools=[FRONTEND_TOOL],
    )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "."))
