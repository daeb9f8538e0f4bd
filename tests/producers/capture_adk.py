"""Capture what ag-ui-adk emits for tool-confirmation scenarios (offline, scripted fake LLM).

Usage: python capture_adk.py OUTDIR
Writes adk-<scenario>.ndjson files. Each line is either
  the RunAgentInput sent to start/resume a run (`inp.model_dump_json(by_alias=True)`; an object with
  threadId, runId, messages and no "type"),
or an AG-UI event exactly as ag_ui.encoder.EventEncoder writes it (the SSE `data:` payload).
The next input's `messages` is rebuilt from the emitted events the way an AG-UI client
(@ag-ui/client's default event application) accumulates them, plus the answer the test adds.
"""

import asyncio
import json
import sys
from collections.abc import AsyncGenerator

from ag_ui.core import RunAgentInput
from ag_ui.encoder import EventEncoder
from ag_ui_adk import ADKAgent
from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.tools import FunctionTool
from google.genai import types

ENCODER = EventEncoder()


class ScriptedLlm(BaseLlm):
    """No-network fake model. Stateless: looks at the request to decide.

    - latest content has function responses -> a short text summarising them
    - latest content is a user text asking for work ("delete"/"email") -> function call(s) in `calls`
    - otherwise -> a plain text reply
    """

    calls: list[dict] = []

    @classmethod
    def supported_models(cls) -> list[str]:
        return ["scripted-fake"]

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        contents = llm_request.contents or []
        last = contents[-1] if contents else None
        responses = [p.function_response for p in (last.parts or [])] if last is not None else []
        responses = [r for r in responses if r is not None]
        if not responses:
            text = (
                " ".join(p.text for p in (last.parts or []) if p.text) if last is not None else ""
            )
            if "delete" in text.lower() or "email" in text.lower():
                parts = [
                    types.Part(
                        function_call=types.FunctionCall(id=c["id"], name=c["name"], args=c["args"])
                    )
                    for c in self.calls
                ]
                yield LlmResponse(
                    content=types.Content(role="model", parts=parts),
                    partial=False,
                    turn_complete=True,
                )
            else:
                yield LlmResponse(
                    content=types.Content(
                        role="model", parts=[types.Part(text="You are welcome.")]
                    ),
                    partial=False,
                    turn_complete=True,
                )
            return
        summary = "; ".join(
            f"{r.name}: {json.dumps(r.response, sort_keys=True)}" for r in responses
        )
        text = f"Tool results received. {summary}"
        yield LlmResponse(
            content=types.Content(role="model", parts=[types.Part(text=text)]),
            partial=False,
            turn_complete=True,
        )


def delete_file(path: str) -> dict:
    """Delete a file."""
    return {"status": "deleted", "path": path}


def send_email(to: str, subject: str) -> dict:
    """Send an email."""
    return {"status": "sent", "to": to}


def make_adk_agent(calls: list[dict]) -> LlmAgent:
    return LlmAgent(
        name="demo_agent",
        model=ScriptedLlm(model="scripted-fake", calls=calls),
        instruction="You are a demo agent.",
        tools=[
            FunctionTool(delete_file, require_confirmation=True),
            FunctionTool(send_email, require_confirmation=True),
        ],
    )


ONE_CALL = [{"id": "fc-delete-1", "name": "delete_file", "args": {"path": "/tmp/demo.txt"}}]
TWO_CALLS = [
    {"id": "fc-delete-a", "name": "delete_file", "args": {"path": "/tmp/a.txt"}},
    {
        "id": "fc-mail-b",
        "name": "send_email",
        "args": {"to": "someone@example.test", "subject": "hi"},
    },
]


class Recorder:
    """Drives ADKAgent.run and keeps the client-side message history like @ag-ui/client does."""

    def __init__(self, agent: ADKAgent, thread_id: str):
        self.agent = agent
        self.thread_id = thread_id
        self.lines: list[str] = []
        self.run_no = 0
        self.messages: list[dict] = []
        self.confirmation_ids: list[
            str
        ] = []  # adk_request_confirmation tool call ids seen in the last run
        self.interrupt_ids: list[str] = []  # ids from RUN_FINISHED.outcome (outcome mode)

    def _msg(self, mid):
        for m in self.messages:
            if m["id"] == mid:
                return m
        return None

    def _apply(self, d):
        t = d["type"]
        if t == "TEXT_MESSAGE_START":
            if not self._msg(d["messageId"]):
                self.messages.append(
                    {"id": d["messageId"], "role": d.get("role", "assistant"), "content": ""}
                )
        elif t == "TEXT_MESSAGE_CONTENT":
            m = self._msg(d["messageId"])
            m["content"] = (m.get("content") or "") + d["delta"]
        elif t == "TOOL_CALL_START":
            pid = d.get("parentMessageId") or d["toolCallId"]
            m = self._msg(pid)
            if m is None or m["role"] != "assistant":
                m = {"id": pid, "role": "assistant"}
                self.messages.append(m)
            m.setdefault("toolCalls", []).append(
                {
                    "id": d["toolCallId"],
                    "type": "function",
                    "function": {"name": d["toolCallName"], "arguments": ""},
                }
            )
            if d["toolCallName"] == "adk_request_confirmation":
                self.confirmation_ids.append(d["toolCallId"])
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
        elif t == "RUN_FINISHED" and d.get("outcome", {}).get("type") == "interrupt":
            self.interrupt_ids = [i["id"] for i in d["outcome"]["interrupts"]]

    async def run(
        self,
        *,
        user_text: str | None = None,
        tool_answers: list[tuple] | None = None,
        resume=None,
        interleave_answers: bool = False,
    ):
        """tool_answers are appended at the end of the history, or (interleave_answers=True) each one
        right after the assistant message that carries its tool call."""
        self.run_no += 1
        if user_text is not None:
            self.messages.append(
                {"id": f"user-{self.run_no}", "role": "user", "content": user_text}
            )
        for call_id, content in tool_answers or []:
            answer = {
                "id": f"tool-answer-{self.run_no}-{call_id}",
                "role": "tool",
                "toolCallId": call_id,
                "content": json.dumps(content),
            }
            pos = len(self.messages)
            if interleave_answers:
                for i, m in enumerate(self.messages):
                    if any(tc["id"] == call_id for tc in m.get("toolCalls", [])):
                        pos = i + 1
            self.messages.insert(pos, answer)
        raw = {
            "threadId": self.thread_id,
            "runId": f"run-{self.run_no}",
            "messages": self.messages,
            "tools": [],
            "context": [],
            "state": {},
            "forwardedProps": {},
        }
        if resume is not None:
            raw["resume"] = resume
        inp = RunAgentInput.model_validate(raw)
        self.lines.append(inp.model_dump_json(by_alias=True))  # the RunAgentInput line (no "type")
        self.confirmation_ids = []
        self.interrupt_ids = []
        async for ev in self.agent.run(inp):
            sse = ENCODER.encode(ev)
            assert sse.startswith("data: ") and sse.endswith("\n\n")
            payload = sse[len("data: ") : -2]
            self.lines.append(payload)
            self._apply(json.loads(payload))

    def write(self, path):
        with open(path, "w") as f:
            for line in self.lines:
                f.write(line + "\n")


def make_agent(calls, **opts):
    return ADKAgent(
        adk_agent=make_adk_agent(calls),
        app_name="demo_app",
        user_id="demo_user",
        use_in_memory_services=True,
        **opts,
    )


async def main(outdir: str):
    def out(name):
        return f"{outdir}/adk-{name}.ndjson"

    # 1. default mode: confirmation, approved with a role:"tool" message {"confirmed": true};
    #    then a 3rd run (new user turn) whose history repeats the answer
    r = Recorder(make_agent(ONE_CALL), "thread-adk-approve")
    await r.run(user_text="Please delete the demo file.")
    cid = r.confirmation_ids[0]
    await r.run(tool_answers=[(cid, {"confirmed": True})])
    await r.run(user_text="Thanks, that is all.")
    r.write(out("approve-default"))

    # 2. default mode: declined with {"confirmed": false}
    r = Recorder(make_agent(ONE_CALL), "thread-adk-decline")
    await r.run(user_text="Please delete the demo file.")
    cid = r.confirmation_ids[0]
    await r.run(tool_answers=[(cid, {"confirmed": False})])
    r.write(out("decline-default"))

    # 3. default mode: two confirmations in one run, answered in one input (approve one, decline other)
    r = Recorder(make_agent(TWO_CALLS), "thread-adk-two")
    await r.run(user_text="Delete a.txt and email someone.")
    c1, c2 = r.confirmation_ids[:2]
    await r.run(tool_answers=[(c1, {"confirmed": True}), (c2, {"confirmed": False})])
    r.write(out("two-confirmations-default"))

    # 3b. same, but each answer placed right after the assistant message that issued its call
    r = Recorder(make_agent(TWO_CALLS), "thread-adk-two-interleaved")
    await r.run(user_text="Delete a.txt and email someone.")
    c1, c2 = r.confirmation_ids[:2]
    await r.run(
        tool_answers=[(c1, {"confirmed": True}), (c2, {"confirmed": False})],
        interleave_answers=True,
    )
    r.write(out("two-confirmations-default-interleaved"))

    # 3c. two confirmations answered one per run (first approve, later decline the other)
    r = Recorder(make_agent(TWO_CALLS), "thread-adk-two-separate")
    await r.run(user_text="Delete a.txt and email someone.")
    c1, c2 = r.confirmation_ids[:2]
    await r.run(tool_answers=[(c1, {"confirmed": True})])
    await r.run(tool_answers=[(c2, {"confirmed": False})])
    r.write(out("two-confirmations-default-separate-runs"))

    # 4. outcome mode (emit_interrupt_outcome=True): resume[] resolved
    r = Recorder(make_agent(ONE_CALL, emit_interrupt_outcome=True), "thread-adk-outcome-approve")
    await r.run(user_text="Please delete the demo file.")
    iid = r.interrupt_ids[0]
    await r.run(resume=[{"interruptId": iid, "status": "resolved", "payload": {"confirmed": True}}])
    r.write(out("approve-outcome-resume10"))

    # 5. outcome mode: resume[] cancelled
    r = Recorder(make_agent(ONE_CALL, emit_interrupt_outcome=True), "thread-adk-outcome-cancel")
    await r.run(user_text="Please delete the demo file.")
    iid = r.interrupt_ids[0]
    await r.run(resume=[{"interruptId": iid, "status": "cancelled"}])
    r.write(out("cancel-outcome-resume10"))

    # 6. outcome mode, but the client answers with a plain role:"tool" message (no resume[]): rejected
    r = Recorder(make_agent(ONE_CALL, emit_interrupt_outcome=True), "thread-adk-outcome-toolmsg")
    await r.run(user_text="Please delete the demo file.")
    cid = r.confirmation_ids[0]
    await r.run(tool_answers=[(cid, {"confirmed": True})])
    r.write(out("outcome-answered-by-tool-message"))

    # 7. outcome mode, two confirmations, resume[] with two entries
    r = Recorder(make_agent(TWO_CALLS, emit_interrupt_outcome=True), "thread-adk-outcome-two")
    await r.run(user_text="Delete a.txt and email someone.")
    i1, i2 = r.interrupt_ids[:2]
    await r.run(
        resume=[
            {"interruptId": i1, "status": "resolved", "payload": {"confirmed": True}},
            {"interruptId": i2, "status": "resolved", "payload": {"confirmed": False}},
        ]
    )
    r.write(out("two-confirmations-outcome-resume10"))

    # 7b. outcome mode, resume[] naming an unknown interrupt id
    r = Recorder(make_agent(ONE_CALL, emit_interrupt_outcome=True), "thread-adk-outcome-wrong-id")
    await r.run(user_text="Please delete the demo file.")
    await r.run(
        resume=[
            {
                "interruptId": "not-the-real-interrupt-id",
                "status": "resolved",
                "payload": {"confirmed": True},
            }
        ]
    )
    r.write(out("outcome-resume10-wrong-id"))

    # 8. default mode, emit_messages_snapshot=True (history comes from MESSAGES_SNAPSHOT)
    r = Recorder(make_agent(ONE_CALL, emit_messages_snapshot=True), "thread-adk-snapshot")
    await r.run(user_text="Please delete the demo file.")
    cid = r.confirmation_ids[0]
    await r.run(tool_answers=[(cid, {"confirmed": True})])
    r.write(out("approve-default-messages-snapshot"))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "."))
