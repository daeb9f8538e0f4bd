"""Capture what ag-ui-langgraph emits for interrupt / resume scenarios (offline, no LLM).

Usage: python capture_langgraph.py OUTDIR
Writes langgraph-<scenario>.ndjson files. Each line is either
  the RunAgentInput sent to start/resume a run (`inp.model_dump_json(by_alias=True)`; an object with
  threadId, runId, messages and no "type"),
or an AG-UI event exactly as ag_ui.encoder.EventEncoder writes it (the SSE `data:` payload).
"""

import asyncio
import json
import sys
from collections.abc import Iterator
from typing import Any

from ag_ui.core import RunAgentInput
from ag_ui.encoder import EventEncoder
from ag_ui_langgraph import LangGraphAgent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Send, interrupt

ENCODER = EventEncoder()


class ScriptedChatModel(BaseChatModel):
    """Fake chat model: returns the scripted AIMessages in order; streams text and tool-call chunks."""

    script: list[AIMessage]
    cursor: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted-fake"

    def bind_tools(self, tools, **kwargs):  # used by langchain.agents.create_agent
        return self

    def _next(self) -> AIMessage:
        msg = self.script[self.cursor]
        self.cursor += 1
        return msg

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._next())])

    def _stream(
        self, messages, stop=None, run_manager: CallbackManagerForLLMRun | None = None, **kwargs
    ) -> Iterator[ChatGenerationChunk]:
        msg = self._next()
        if msg.content:
            for tok in str(msg.content).split(" "):
                chunk = ChatGenerationChunk(message=AIMessageChunk(content=tok + " ", id=msg.id))
                if run_manager:
                    run_manager.on_llm_new_token(tok, chunk=chunk)
                yield chunk
        # Like real providers: a first chunk with id + name and empty args, then the args.
        for i, tc in enumerate(msg.tool_calls):
            for part in (
                {"name": tc["name"], "args": "", "id": tc["id"], "index": i},
                {"name": None, "args": json.dumps(tc["args"]), "id": None, "index": i},
            ):
                chunk = ChatGenerationChunk(
                    message=AIMessageChunk(content="", id=msg.id, tool_call_chunks=[part])
                )
                if run_manager:
                    run_manager.on_llm_new_token("", chunk=chunk)
                yield chunk
        yield ChatGenerationChunk(
            message=AIMessageChunk(
                content="",
                id=msg.id,
                chunk_position="last",
                response_metadata={"finish_reason": "tool_calls" if msg.tool_calls else "stop"},
            )
        )


def tool_call(name, args, id_):
    return {"name": name, "args": args, "id": id_, "type": "tool_call"}


def approved(decision: Any) -> bool:
    if isinstance(decision, dict):
        if decision.get("__agui_cancelled__"):
            return False
        return bool(decision.get("approved"))
    return decision is True or decision == "approve"


def build_graph(script: list[AIMessage], parallel: bool = False, checkpointer: Any = None):
    model = ScriptedChatModel(script=script)

    def agent(state: MessagesState):
        return {"messages": [model.invoke(state["messages"])]}

    def approve(state: MessagesState):
        # one interrupt per pending tool call, sequentially (one per run)
        last = state["messages"][-1]
        out = []
        for tc in last.tool_calls:
            decision = interrupt(
                {
                    "reason": "tool_approval",
                    "message": f"Allow {tc['name']}?",
                    "toolCallId": tc["id"],
                    "action": tc["name"],
                    "args": tc["args"],
                }
            )
            ok = approved(decision)
            out.append(
                ToolMessage(
                    content="done" if ok else "declined", tool_call_id=tc["id"], name=tc["name"]
                )
            )
        return {"messages": out}

    def approve_one(arg: dict):
        tc = arg["tool_call"]
        decision = interrupt(
            {
                "reason": "tool_approval",
                "message": f"Allow {tc['name']}?",
                "toolCallId": tc["id"],
                "action": tc["name"],
                "args": tc["args"],
            }
        )
        ok = approved(decision)
        return {
            "messages": [
                ToolMessage(
                    content=("done" if ok else "declined")
                    + f" ({json.dumps(decision, sort_keys=True)})",
                    tool_call_id=tc["id"],
                    name=tc["name"],
                )
            ]
        }

    def route(state: MessagesState):
        last = state["messages"][-1]
        if isinstance(last, AIMessage) and last.tool_calls:
            if parallel:
                return [Send("approve_one", {"tool_call": tc}) for tc in last.tool_calls]
            return "approve"
        return END

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    if parallel:
        g.add_node("approve_one", approve_one)
        g.add_edge("approve_one", "agent")
        g.add_conditional_edges("agent", route, ["approve_one", END])
    else:
        g.add_node("approve", approve)
        g.add_edge("approve", "agent")
        g.add_conditional_edges("agent", route, ["approve", END])
    g.add_edge(START, "agent")
    return g.compile(checkpointer=checkpointer or InMemorySaver())


def one_call_script():
    return [
        AIMessage(
            content="",
            id="ai-1",
            tool_calls=[tool_call("delete_file", {"path": "/tmp/demo.txt"}, "call_del_1")],
        ),
        AIMessage(content="Finished the request.", id="ai-2"),
    ]


def two_call_script():
    return [
        AIMessage(
            content="",
            id="ai-1",
            tool_calls=[
                tool_call("delete_file", {"path": "/tmp/a.txt"}, "call_del_a"),
                tool_call(
                    "send_email", {"to": "someone@example.test", "subject": "hi"}, "call_mail_b"
                ),
            ],
        ),
        AIMessage(content="Finished the request.", id="ai-2"),
    ]


def hitl_middleware_graph():
    """langchain.agents.create_agent + HumanInTheLoopMiddleware (action_requests dialect)."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import HumanInTheLoopMiddleware
    from langchain_core.tools import tool

    @tool
    def delete_file(path: str) -> str:
        """Delete a file."""
        return f"deleted {path}"

    @tool
    def send_email(to: str, subject: str) -> str:
        """Send an email."""
        return f"sent to {to}"

    model = ScriptedChatModel(script=two_call_script())
    return create_agent(
        model=model,
        tools=[delete_file, send_email],
        middleware=[
            HumanInTheLoopMiddleware(interrupt_on={"delete_file": True, "send_email": True})
        ],
        checkpointer=InMemorySaver(),
    )


def tool_interrupt_graph():
    """The LangGraph-docs pattern: the tool itself calls interrupt(); prebuilt ToolNode + tools_condition."""
    from langchain_core.tools import tool
    from langgraph.prebuilt import ToolNode, tools_condition

    @tool
    def delete_file(path: str) -> str:
        """Delete a file (asks a human first)."""
        decision = interrupt(
            {
                "reason": "tool_approval",
                "message": f"Delete {path}?",
                "action": "delete_file",
                "args": {"path": path},
            }
        )
        if approved(decision):
            return f"deleted {path}"
        return "declined by user"

    model = ScriptedChatModel(script=one_call_script())

    def agent(state: MessagesState):
        return {"messages": [model.invoke(state["messages"])]}

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode([delete_file]))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=InMemorySaver())


class Recorder:
    def __init__(self, agent: LangGraphAgent, thread_id: str):
        self.agent = agent
        self.thread_id = thread_id
        self.lines: list[str] = []
        self.run_no = 0
        self.messages: list[dict] = []  # client-side history (from MESSAGES_SNAPSHOT)
        self.last_interrupt_ids: list[str] = []

    async def run(self, *, new_user_text: str | None = None, resume=None, forwarded_props=None):
        self.run_no += 1
        msgs = list(self.messages)
        if new_user_text is not None:
            msgs.append({"id": f"user-{self.run_no}", "role": "user", "content": new_user_text})
        raw = {
            "threadId": self.thread_id,
            "runId": f"run-{self.run_no}",
            "messages": msgs,
            "tools": [],
            "context": [],
            "state": {},
        }
        if resume is not None:
            raw["resume"] = resume
        if forwarded_props is not None:
            raw["forwardedProps"] = forwarded_props
        inp = RunAgentInput.model_validate(raw)
        self.lines.append(inp.model_dump_json(by_alias=True))  # the RunAgentInput line (no "type")
        self.last_interrupt_ids = []
        # clone() per request, as ag_ui_langgraph.endpoint.add_langgraph_fastapi_endpoint does
        async for ev in self.agent.clone().run(inp):
            sse = ENCODER.encode(ev)
            assert sse.startswith("data: ") and sse.endswith("\n\n")
            payload = sse[len("data: ") : -2]
            self.lines.append(payload)
            d = json.loads(payload)
            if d["type"] == "MESSAGES_SNAPSHOT":
                self.messages = d["messages"]
            if (
                d["type"] == "CUSTOM"
                and d.get("name") == "on_interrupt"
                and isinstance(d.get("rawEvent"), dict)
            ):
                self.last_interrupt_ids.append(d["rawEvent"]["id"])
            if d["type"] == "RUN_FINISHED" and d.get("outcome", {}).get("type") == "interrupt":
                for i in d["outcome"]["interrupts"]:
                    if i["id"] not in self.last_interrupt_ids:
                        self.last_interrupt_ids.append(i["id"])

    def write(self, path):
        with open(path, "w") as f:
            for line in self.lines:
                f.write(line + "\n")


def make_agent(graph, **opts):
    return LangGraphAgent(name="demo", graph=graph, **opts)


async def main(outdir: str):
    def out(name):
        return f"{outdir}/langgraph-{name}.ndjson"

    # 1. default options, legacy resume channel (forwardedProps.command.resume), approve
    r = Recorder(make_agent(build_graph(one_call_script())), "thread-lg-approve-legacy")
    await r.run(new_user_text="Please delete the demo file.")
    await r.run(forwarded_props={"command": {"resume": {"approved": True}}})
    r.write(out("approve-legacy"))

    # 2. default options, legacy resume as a JSON *string* (CopilotKit style), decline
    r = Recorder(make_agent(build_graph(one_call_script())), "thread-lg-decline-legacy")
    await r.run(new_user_text="Please delete the demo file.")
    await r.run(forwarded_props={"command": {"resume": json.dumps({"approved": False})}})
    r.write(out("decline-legacy-string"))

    # 3. opt-in 1.0 outcome (emit_interrupt_outcome=True), resume[] approve
    r = Recorder(
        make_agent(build_graph(one_call_script()), emit_interrupt_outcome=True),
        "thread-lg-approve-resume",
    )
    await r.run(new_user_text="Please delete the demo file.")
    iid = r.last_interrupt_ids[0]
    await r.run(resume=[{"interruptId": iid, "status": "resolved", "payload": {"approved": True}}])
    r.write(out("approve-resume10"))

    # 4. opt-in 1.0 outcome, resume[] cancelled (decline)
    r = Recorder(
        make_agent(build_graph(one_call_script()), emit_interrupt_outcome=True),
        "thread-lg-cancel-resume",
    )
    await r.run(new_user_text="Please delete the demo file.")
    iid = r.last_interrupt_ids[0]
    await r.run(resume=[{"interruptId": iid, "status": "cancelled"}])
    r.write(out("cancel-resume10"))

    # 5. default options but client sends 1.0 resume[] (no outcome was emitted; id read from rawEvent.id)
    r = Recorder(make_agent(build_graph(one_call_script())), "thread-lg-default-resume10")
    await r.run(new_user_text="Please delete the demo file.")
    iid = r.last_interrupt_ids[0]
    await r.run(resume=[{"interruptId": iid, "status": "resolved", "payload": {"approved": True}}])
    r.write(out("approve-default-resume10"))

    # 6. raw events off (emit_raw_events=False): CUSTOM on_interrupt without rawEvent, legacy approve
    r = Recorder(
        make_agent(build_graph(one_call_script()), emit_raw_events=False), "thread-lg-noraw"
    )
    await r.run(new_user_text="Please delete the demo file.")
    await r.run(forwarded_props={"command": {"resume": {"approved": True}}})
    r.write(out("approve-legacy-noraw"))

    # 7. legacy event off (enable_legacy_on_interrupt_event=False): outcome forced on
    r = Recorder(
        make_agent(build_graph(one_call_script()), enable_legacy_on_interrupt_event=False),
        "thread-lg-nolegacy",
    )
    await r.run(new_user_text="Please delete the demo file.")
    iid = r.last_interrupt_ids[0]
    await r.run(resume=[{"interruptId": iid, "status": "resolved", "payload": {"approved": True}}])
    r.write(out("approve-outcome-only"))

    # 8. both channels on (emit_interrupt_outcome=True); interrupted thread re-run WITHOUT resume
    #    (replay short-circuit), then legacy resume
    r = Recorder(
        make_agent(build_graph(one_call_script()), emit_interrupt_outcome=True), "thread-lg-replay"
    )
    await r.run(new_user_text="Please delete the demo file.")
    await r.run()
    await r.run(forwarded_props={"command": {"resume": {"approved": True}}})
    r.write(out("replay-then-legacy-approve"))

    # 9. two interrupts in one run (parallel Send fan-out), legacy map keyed by interrupt id
    r = Recorder(
        make_agent(build_graph(two_call_script(), parallel=True), emit_interrupt_outcome=True),
        "thread-lg-two-legacy",
    )
    await r.run(new_user_text="Delete a.txt and email someone.")
    ids = list(r.last_interrupt_ids)
    await r.run(
        forwarded_props={
            "command": {"resume": {ids[0]: {"approved": True}, ids[1]: {"approved": False}}}
        }
    )
    r.write(out("two-interrupts-legacy-map"))

    # 10. two interrupts in one run, 1.0 resume[] with two entries
    r = Recorder(
        make_agent(build_graph(two_call_script(), parallel=True), emit_interrupt_outcome=True),
        "thread-lg-two-resume10",
    )
    await r.run(new_user_text="Delete a.txt and email someone.")
    ids = list(r.last_interrupt_ids)
    # (the integration answers this with RUN_STARTED + RUN_ERROR, see README)
    await r.run(
        resume=[
            {"interruptId": ids[0], "status": "resolved", "payload": {"approved": True}},
            {"interruptId": ids[1], "status": "cancelled"},
        ]
    )
    r.write(out("two-interrupts-resume10"))

    # 11. sequential: one node asks twice (second interrupt only in the resumed run), legacy answers
    r = Recorder(make_agent(build_graph(two_call_script(), parallel=False)), "thread-lg-sequential")
    await r.run(new_user_text="Delete a.txt and email someone.")
    await r.run(forwarded_props={"command": {"resume": {"approved": True}}})
    await r.run(forwarded_props={"command": {"resume": {"approved": True}}})
    r.write(out("sequential-two-legacy"))

    # 13. interrupt() inside the tool (prebuilt ToolNode), legacy approve
    r = Recorder(make_agent(tool_interrupt_graph()), "thread-lg-tool-approve")
    await r.run(new_user_text="Please delete the demo file.")
    await r.run(forwarded_props={"command": {"resume": {"approved": True}}})
    r.write(out("tool-interrupt-approve-legacy"))

    # 14. interrupt() inside the tool, opt-in outcome, resume[] resolved with a decline payload
    r = Recorder(
        make_agent(tool_interrupt_graph(), emit_interrupt_outcome=True), "thread-lg-tool-decline"
    )
    await r.run(new_user_text="Please delete the demo file.")
    iid = r.last_interrupt_ids[0]
    await r.run(resume=[{"interruptId": iid, "status": "resolved", "payload": {"approved": False}}])
    r.write(out("tool-interrupt-decline-resume10"))

    # 15. opt-in outcome; resume[] with ONE entry naming an id that is not the pending interrupt's
    r = Recorder(
        make_agent(build_graph(one_call_script()), emit_interrupt_outcome=True),
        "thread-lg-wrong-id",
    )
    await r.run(new_user_text="Please delete the demo file.")
    await r.run(
        resume=[
            {
                "interruptId": "not-the-real-interrupt-id",
                "status": "resolved",
                "payload": {"approved": True},
            }
        ]
    )
    r.write(out("lone-answer-wrong-id-resume10"))

    # 12. langchain HumanInTheLoopMiddleware (action_requests), default options, legacy resume
    try:
        r = Recorder(make_agent(hitl_middleware_graph()), "thread-lg-hitl-mw")
        await r.run(new_user_text="Delete a.txt and email someone.")
        await r.run(
            forwarded_props={
                "command": {
                    "resume": {
                        "decisions": [
                            {"type": "approve"},
                            {"type": "reject", "message": "no email"},
                        ]
                    }
                }
            }
        )
        r.write(out("hitl-middleware-legacy"))
    except Exception as exc:
        import traceback

        traceback.print_exc()
        print("HITL middleware scenario failed:", exc, file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "."))
