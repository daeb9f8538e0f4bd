"""Capture what agno's AG-UI interface (`agno.os.interfaces.agui.AGUI`) emits for a tool that
needs a human's confirmation, offline, through its real FastAPI route served in process (ASGI),
with a scripted stand-in for the model (no network) and agno's in-memory session store.

Usage: python capture_agno.py OUTDIR   (in the venv of tests/producers/requirements-agno.txt)
Writes agno-<scenario>.ndjson files. Each line is either
  the RunAgentInput posted to start or resume a run (an object with threadId, runId, messages
  and no "type"), or
  an AG-UI event exactly as the route streamed it (the SSE `data:` payload).
agno pauses a run on a `requires_confirmation` tool and announces it only as that tool's
TOOL_CALL_START/ARGS/END and a plain RUN_FINISHED; the client answers with a trailing tool
message for the call (`{"accepted": true}`), as agno's AG-UI frontend does.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("AGNO_TELEMETRY", "false")

from agno.agent import Agent
from agno.db.in_memory import InMemoryDb
from agno.models.base import Model
from agno.models.response import ModelResponse
from agno.os.interfaces.agui import AGUI
from agno.tools import tool
from fastapi import FastAPI
from fastapi.testclient import TestClient

ONE_CALL = [("call_del_1", "delete_file", {"path": "/tmp/demo.txt"})]
TWO_CALLS = [
    ("call_del_a", "delete_file", {"path": "/tmp/a.txt"}),
    ("call_mail_b", "send_email", {"to": "ops@example.com", "subject": "report"}),
]


class ScriptedModel(Model):
    """No-network stand-in for the model: a user text asking to delete (or delete and email)
    gets the scripted tool calls, a tool result gets a short text, anything else
    "You are welcome."."""

    def __init__(self) -> None:
        super().__init__(id="scripted-fake", name="Scripted", provider="scripted")

    def _reply(self, messages: list[Any]) -> ModelResponse:
        last = messages[-1]
        text = str(last.content or "").lower()
        if last.role == "user" and "delete" in text:
            calls = TWO_CALLS if "email" in text else ONE_CALL
            return ModelResponse(
                role="assistant",
                tool_calls=[
                    {
                        "id": cid,
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args)},
                    }
                    for cid, name, args in calls
                ],
            )
        if last.role == "tool":
            return ModelResponse(role="assistant", content="Finished the request.")
        return ModelResponse(role="assistant", content="You are welcome.")

    def invoke(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return self._reply(kwargs["messages"])

    async def ainvoke(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return self._reply(kwargs["messages"])

    def invoke_stream(self, *args: Any, **kwargs: Any) -> Iterator[ModelResponse]:
        yield self._reply(kwargs["messages"])

    async def ainvoke_stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[ModelResponse]:
        yield self._reply(kwargs["messages"])

    def _parse_provider_response(self, response: Any, **kwargs: Any) -> ModelResponse:
        return response  # type: ignore[no-any-return]

    def _parse_provider_response_delta(self, response: Any) -> ModelResponse:
        return response  # type: ignore[no-any-return]


@tool(requires_confirmation=True)
def delete_file(path: str) -> str:
    """Delete a file (needs a human's confirmation)."""
    return f"deleted {path}"


@tool(requires_confirmation=True)
def send_email(to: str, subject: str) -> str:
    """Send an email (needs a human's confirmation)."""
    return f"sent {subject} to {to}"


class Client:
    """An AG-UI client of one thread over HTTP: posts inputs, records them and every event,
    and keeps the history as @ag-ui/client rebuilds it from the events."""

    def __init__(self, thread_id: str) -> None:
        agent = Agent(
            name="ops",
            model=ScriptedModel(),
            tools=[delete_file, send_email],
            db=InMemoryDb(),
            telemetry=False,
        )
        app = FastAPI()
        app.include_router(AGUI(agent=agent).get_router())
        self.http = TestClient(app)
        self.thread_id = thread_id
        self.lines: list[str] = []
        self.history: list[dict[str, Any]] = []
        self.pending: list[str] = []  # tool calls of the last run that got no result
        self.n = 0

    def run(self, *, user: str | None = None, answers: dict[str, Any] | None = None) -> None:
        """One run: a new user message, or tool messages answering calls (by id)."""
        self.n += 1
        if user is not None:
            self.history.append({"id": f"user-{self.n}", "role": "user", "content": user})
        for call_id, payload in (answers or {}).items():
            self.history.append(
                {
                    "id": f"answer-{self.n}-{call_id}",
                    "role": "tool",
                    "toolCallId": call_id,
                    "content": json.dumps(payload),
                }
            )
        inp = {
            "threadId": self.thread_id,
            "runId": f"run-{self.n}",
            "state": {},
            "messages": list(self.history),
            "tools": [],
            "context": [],
            "forwardedProps": {},
        }
        self.lines.append(json.dumps(inp))
        with self.http.stream("POST", "/agui", json=inp) as r:
            assert r.status_code == 200, r.status_code
            for raw in r.iter_lines():
                if raw.startswith("data: "):
                    line = raw.removeprefix("data: ")
                    self.lines.append(line)
                    self._follow(json.loads(line))

    def _follow(self, ev: dict[str, Any]) -> None:
        """Keep the history as the client would: assistant texts and tool calls, results."""
        kind = ev["type"]
        if kind == "TEXT_MESSAGE_START":
            self.history.append({"id": ev["messageId"], "role": "assistant", "content": ""})
        elif kind == "TEXT_MESSAGE_CONTENT":
            msg = next(m for m in self.history if m["id"] == ev["messageId"])
            msg["content"] += ev["delta"]
        elif kind == "TOOL_CALL_START":
            parent = next((m for m in self.history if m["id"] == ev.get("parentMessageId")), None)
            if parent is None:
                parent = {"id": ev["toolCallId"], "role": "assistant", "content": ""}
                self.history.append(parent)
            call = {"id": ev["toolCallId"], "type": "function"}
            call["function"] = {"name": ev["toolCallName"], "arguments": ""}
            parent.setdefault("toolCalls", []).append(call)
            self.pending.append(ev["toolCallId"])
        elif kind == "TOOL_CALL_ARGS":
            for m in self.history:
                for c in m.get("toolCalls", []):
                    if c["id"] == ev["toolCallId"]:
                        c["function"]["arguments"] += ev["delta"]
        elif kind == "TOOL_CALL_RESULT":
            self.history.append(
                {
                    "id": ev["messageId"],
                    "role": "tool",
                    "toolCallId": ev["toolCallId"],
                    "content": ev["content"],
                }
            )
            self.pending.remove(ev["toolCallId"])

    def write(self, out: Path, name: str) -> None:
        (out / f"agno-{name}.ndjson").write_text("\n".join(self.lines) + "\n")


ACCEPT = {"accepted": True}
DECLINE = {"accepted": False}


def main(outdir: str) -> None:
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)

    for name, payload in {
        "approve": ACCEPT,
        "decline": DECLINE,
        # agno confirms only `accepted: true`; any other shape is a decline
        "approve-other-shape": {"approved": True},
    }.items():
        c = Client(f"thread-agno-{name}")
        c.run(user="Please delete the demo file.")
        c.run(answers={c.pending[0]: payload})
        c.write(out, name)

    # a cancel: a new message without an answer, on the paused thread
    c = Client("thread-agno-new-message")
    c.run(user="Please delete the demo file.")
    c.run(user="Actually, never mind. Thanks.")
    c.write(out, "new-message-no-resume")

    # the answer comes after a later run finished in success: agno kept the paused run
    c = Client("thread-agno-late-answer")
    c.run(user="Please delete the demo file.")
    paused = list(c.pending)
    c.run(user="Thanks, how are you?")
    c.run(answers={paused[0]: ACCEPT})
    c.write(out, "late-answer-after-later-run")

    # two approvals in one run, both answered in one resume
    c = Client("thread-agno-two")
    c.run(user="Please delete the demo file and email the report.")
    c.run(answers={c.pending[0]: ACCEPT, c.pending[1]: DECLINE})
    c.write(out, "two-approvals")

    # two approvals, only one answered: agno refuses the partial resume
    c = Client("thread-agno-two-partial")
    c.run(user="Please delete the demo file and email the report.")
    c.run(answers={c.pending[0]: ACCEPT})
    c.write(out, "two-approvals-one-answered")

    # an answer naming a tool call that was never asked
    c = Client("thread-agno-wrong-id")
    c.run(user="Please delete the demo file.")
    c.run(answers={"not-a-call": ACCEPT})
    c.write(out, "wrong-id")


if __name__ == "__main__":
    main(sys.argv[1])
