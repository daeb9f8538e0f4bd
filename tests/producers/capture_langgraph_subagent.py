"""Capture what ag-ui-langgraph emits when a subagent asks for approval (offline, no LLM).

A deepagents-style delegation: the parent's model calls the `task` tool (`subagent_type`,
`description`), whose subagent graph (its own `model` node, `lc_agent_name` set, as
`langchain.agents.create_agent` sets it) calls `interrupt()`. With `emit_subagent_events`
the integration streams `SUBAGENT_STARTED`, a `SUBAGENT_FINISHED` with the suspended outcome
naming the interrupt, and the interrupt attributed by `subagentRunId`; the resumed run
restarts and finishes the same invocation.

Usage: python capture_langgraph_subagent.py OUTDIR
Writes langgraph-subagent-<scenario>.ndjson files (the lines as capture_langgraph.py writes).
"""

import asyncio
import sys

from capture_langgraph import Recorder, ScriptedChatModel, approved, make_agent, tool_call
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import interrupt


def subagent_graph():
    model = ScriptedChatModel(script=[AIMessage(content="Purging the cache.", id="sub-ai-1")])

    def model_node(state: MessagesState):
        return {"messages": [model.invoke(state["messages"])]}

    def approve(state: MessagesState):
        decision = interrupt(
            {
                "reason": "tool_approval",
                "message": "Purge the whole cache?",
                "action": "purge_cache",
                "args": {"scope": "all"},
            }
        )
        text = "purged" if approved(decision) else "kept"
        return {"messages": [AIMessage(content=text, id="sub-ai-2")]}

    g = StateGraph(MessagesState)
    g.add_node("model", model_node)
    g.add_node("approve", approve)
    g.add_edge(START, "model")
    g.add_edge("model", "approve")
    g.add_edge("approve", END)
    return g.compile()


def parent_graph():
    subagent = subagent_graph()

    @tool
    async def task(description: str, subagent_type: str, config: RunnableConfig) -> str:
        """Delegate a task to a subagent."""
        meta = {**(config.get("metadata") or {}), "lc_agent_name": subagent_type}
        out = await subagent.ainvoke(
            {"messages": [HumanMessage(content=description)]}, {**config, "metadata": meta}
        )
        return str(out["messages"][-1].content)

    model = ScriptedChatModel(
        script=[
            AIMessage(
                content="",
                id="ai-1",
                tool_calls=[
                    tool_call(
                        "task",
                        {"description": "purge the cache", "subagent_type": "ops"},
                        "call_task_1",
                    )
                ],
            ),
            AIMessage(content="The ops subagent is done.", id="ai-2"),
        ]
    )

    def agent(state: MessagesState):
        return {"messages": [model.invoke(state["messages"])]}

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode([task]))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=InMemorySaver())


async def main(outdir: str) -> None:
    def out(name: str) -> str:
        return f"{outdir}/langgraph-subagent-{name}.ndjson"

    # 1. the 1.0 outcome and resume[]: approve
    r = Recorder(
        make_agent(parent_graph(), emit_interrupt_outcome=True, emit_subagent_events=True),
        "thread-lg-subagent-approve",
    )
    await r.run(new_user_text="Have ops purge the cache.")
    iid = r.last_interrupt_ids[0]
    await r.run(resume=[{"interruptId": iid, "status": "resolved", "payload": {"approved": True}}])
    r.write(out("approve-resume10"))

    # 2. default options (legacy on_interrupt, legacy resume channel): decline
    r = Recorder(
        make_agent(parent_graph(), emit_subagent_events=True), "thread-lg-subagent-decline"
    )
    await r.run(new_user_text="Have ops purge the cache.")
    await r.run(forwarded_props={"command": {"resume": {"approved": False}}})
    r.write(out("decline-legacy"))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "."))
