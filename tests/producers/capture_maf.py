"""Capture what Microsoft Agent Framework's AG-UI integration (agent-framework-ag-ui) emits for
tool-approval and workflow `request_info` scenarios, offline, with a scripted fake chat client.

Usage: python capture_maf.py OUTDIR   (in the venv of tests/producers/requirements-maf.txt)
Writes maf-<scenario>.ndjson files. Each line is either
  the run input sent to start or resume a run (a dict with threadId, runId, messages and no
  "type"), or
  an AG-UI event exactly as ag_ui.encoder.EventEncoder writes it (the SSE `data:` payload).
The next input's `messages` is the last MESSAGES_SNAPSHOT the client received, as
@ag-ui/client keeps it, plus whatever the scenario adds.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from ag_ui.encoder import EventEncoder
from agent_framework import (
    Agent,
    BaseChatClient,
    ChatResponse,
    ChatResponseUpdate,
    Content,
    Executor,
    Message,
    WorkflowBuilder,
    WorkflowContext,
    handler,
    response_handler,
    tool,
)
from agent_framework._middleware import ChatMiddlewareLayer
from agent_framework._tools import FunctionInvocationLayer
from agent_framework._types import ResponseStream
from agent_framework.observability import ChatTelemetryLayer
from agent_framework_ag_ui import AgentFrameworkAgent, AgentFrameworkWorkflow

ENCODER = EventEncoder()

ONE_CALL = [("call_del_1", "delete_file", {"path": "/tmp/demo.txt"})]
TWO_CALLS = [
    ("call_del_a", "delete_file", {"path": "/tmp/a.txt"}),
    ("call_mail_b", "send_email", {"to": "ops@example.com", "subject": "report"}),
]


class ScriptedClient(
    FunctionInvocationLayer, ChatMiddlewareLayer, ChatTelemetryLayer, BaseChatClient
):  # type: ignore[misc]
    """No-network fake model: a user text asking for work gets the scripted function calls,
    function results get a short text, anything else "You are welcome."."""

    def __init__(self, calls: list[tuple[str, str, dict[str, Any]]]) -> None:
        super().__init__()
        self._calls = calls

    def _inner_get_response(self, *, messages: Any, stream: bool, options: Any, **kw: Any) -> Any:
        last = messages[-1]
        kinds = {c.type for c in last.contents}
        text = " ".join(c.text or "" for c in last.contents if c.type == "text").lower()
        if "function_result" in kinds:
            contents = [Content.from_text("Finished the request.")]
        elif last.role == "user" and ("delete" in text or "email" in text):
            contents = [
                Content.from_function_call(cid, name, arguments=args)
                for cid, name, args in self._calls
            ]
        else:
            contents = [Content.from_text("You are welcome.")]
        update = ChatResponseUpdate(role="assistant", contents=contents)

        async def _stream() -> AsyncIterator[ChatResponseUpdate]:
            yield update

        if stream:
            return ResponseStream(_stream(), finalizer=ChatResponse.from_updates)

        async def _one() -> ChatResponse:
            return ChatResponse.from_updates([update])

        return _one()


@tool(approval_mode="always_require")
def delete_file(path: str) -> str:
    """Delete a file."""
    return json.dumps({"status": "deleted", "path": path})


@tool(approval_mode="always_require")
def send_email(to: str, subject: str) -> str:
    """Send an email."""
    return json.dumps({"status": "sent", "to": to})


def make_agent(calls: list[tuple[str, str, dict[str, Any]]]) -> AgentFrameworkAgent:
    agent = Agent(
        client=ScriptedClient(calls),
        name="assistant",
        instructions="Do what the user asks.",
        tools=[delete_file, send_email],
    )
    return AgentFrameworkAgent(agent=agent)


class Client:
    """An AG-UI client of one thread: sends inputs, records them and every event."""

    def __init__(self, runner: Any, thread_id: str) -> None:
        self.runner, self.thread_id = runner, thread_id
        self.lines: list[str] = []
        self.history: list[dict[str, Any]] = []
        self.interrupts: list[dict[str, Any]] = []  # of the latest RUN_FINISHED outcome
        self.customs: list[dict[str, Any]] = []
        self.n = 0

    async def run(
        self,
        *,
        user: str | None = None,
        resume: list[dict[str, Any]] | None = None,
        extra: list[dict[str, Any]] | None = None,
    ) -> None:
        self.n += 1
        messages = list(self.history)
        if user is not None:
            messages.append({"id": f"user-{self.n}", "role": "user", "content": user})
        messages += extra or []
        inp: dict[str, Any] = {
            "threadId": self.thread_id,
            "runId": f"run-{self.n}",
            "messages": messages,
            "tools": [],
            "context": [],
            "state": {},
            "forwardedProps": {},
        }
        if resume is not None:
            inp["resume"] = resume
        self.lines.append(json.dumps(inp))
        self.interrupts, self.customs = [], []
        async for ev in self.runner.run(inp):
            line = ENCODER.encode(ev).strip().removeprefix("data: ")
            self.lines.append(line)
            obj = json.loads(line)
            if obj["type"] == "MESSAGES_SNAPSHOT":
                self.history = obj["messages"]
            elif obj["type"] == "RUN_FINISHED" and isinstance(obj.get("outcome"), dict):
                self.interrupts = obj["outcome"].get("interrupts") or []
            elif obj["type"] == "CUSTOM":
                self.customs.append(obj)

    def ids(self) -> list[str]:
        return [i["id"] for i in self.interrupts]

    def write(self, path: Path) -> None:
        path.write_text("\n".join(self.lines) + "\n")


def resolved(interrupt_id: str, payload: Any) -> dict[str, Any]:
    return {"interruptId": interrupt_id, "status": "resolved", "payload": payload}


def cancelled(interrupt_id: str) -> dict[str, Any]:
    return {"interruptId": interrupt_id, "status": "cancelled"}


ASK = "Please delete the demo file."
ASK_TWO = "Please delete the file and email the report."


async def one_answer(name: str, out: Path, answer: Callable[[str], dict[str, Any]]) -> None:
    c = Client(make_agent(ONE_CALL), f"thread-maf-{name}")
    await c.run(user=ASK)
    await c.run(resume=[answer(c.ids()[0])])
    c.write(out / f"maf-{name}.ndjson")


PURGE = "review-purge"  # the workflow's own request id, reused each time it asks


class Review(Executor):
    """A workflow step that asks a person (request_info), under its own request id, and asks
    again under the same id until it hears yes."""

    @handler
    async def start(self, messages: list[Message], ctx: WorkflowContext[str]) -> None:
        await ctx.request_info(
            request_data={"question": "Purge the cache?"}, response_type=str, request_id=PURGE
        )

    @response_handler
    async def answered(
        self, original: dict[str, Any], reply: str, ctx: WorkflowContext[str]
    ) -> None:
        if reply.strip().lower() != "yes":
            await ctx.request_info(
                request_data={"question": "Really not?"}, response_type=str, request_id=PURGE
            )
            return
        await ctx.yield_output("purged")


def make_workflow() -> AgentFrameworkWorkflow:
    return AgentFrameworkWorkflow(
        workflow_factory=lambda _thread: WorkflowBuilder(start_executor=Review(id="review")).build()
    )


async def main(outdir: str) -> None:
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    await one_answer("approve", out, lambda i: resolved(i, {"approved": True}))
    await one_answer("decline", out, lambda i: resolved(i, {"approved": False}))
    await one_answer("cancel", out, cancelled)
    # the documented alias of `approved`
    await one_answer("approve-accepted-alias", out, lambda i: resolved(i, {"accepted": True}))
    await one_answer(
        "approve-edited-args",
        out,
        lambda i: resolved(i, {"approved": True, "editedArgs": {"path": "/tmp/other.txt"}}),
    )
    await one_answer("wrong-id", out, lambda i: resolved("af-call-nobody", {"approved": True}))

    c = Client(make_agent(TWO_CALLS), "thread-maf-two-approve")
    await c.run(user=ASK_TWO)
    await c.run(resume=[resolved(i, {"approved": True}) for i in c.ids()])
    c.write(out / "maf-two-approve.ndjson")

    # approve the first, reject the second in one resume
    c = Client(make_agent(TWO_CALLS), "thread-maf-two-approve-reject")
    await c.run(user=ASK_TWO)
    first, second = c.ids()
    await c.run(resume=[resolved(first, {"approved": True}), resolved(second, {"approved": False})])
    c.write(out / "maf-two-approve-reject.ndjson")

    # a new user message instead of an answer
    c = Client(make_agent(ONE_CALL), "thread-maf-new-message")
    await c.run(user=ASK)
    await c.run(user="Thanks, never mind.")
    c.write(out / "maf-new-message-no-resume.ndjson")

    # answering the synthetic confirm_changes call with a tool message, not resume[]
    c = Client(make_agent(ONE_CALL), "thread-maf-tool-message")
    await c.run(user=ASK)
    confirm = next(
        tc["id"]
        for m in c.history
        for tc in m.get("toolCalls") or []
        if tc["function"]["name"] == "confirm_changes"
    )
    answer = {
        "id": "tool-answer-1",
        "role": "tool",
        "toolCallId": confirm,
        "content": json.dumps({"accepted": True, "steps": []}),
    }
    await c.run(extra=[answer])
    c.write(out / "maf-answered-by-tool-message.ndjson")

    # workflow request_info: asked, answered "no", asked again, answered "yes"
    c = Client(make_workflow(), "thread-maf-workflow")
    await c.run(user="Start the review.")
    await c.run(resume=[resolved(c.ids()[0], "no")])
    await c.run(resume=[resolved(c.ids()[0], "yes")])
    c.write(out / "maf-workflow-request-info.ndjson")

    # workflow request_info left pending: a run without an answer asks again
    c = Client(make_workflow(), "thread-maf-workflow-again")
    await c.run(user="Start the review.")
    asked = c.ids()
    await c.run(user="Are you there?")
    await c.run(resume=[resolved(asked[0], "yes")])
    c.write(out / "maf-workflow-asks-again.ndjson")

    # the documented alias, declining
    await one_answer("decline-accepted-alias", out, lambda i: resolved(i, {"accepted": False}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
