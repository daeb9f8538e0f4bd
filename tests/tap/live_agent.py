"""An agent process for the liveness scenarios: ag-ui-langgraph over a graph with a scripted fake
model that asks for approval of one tool call, behind the one-line `TapMiddleware` install, on
uvicorn (with its lifespan, as deployed).

    python -m tests.tap.live_agent PORT SIDEWATCH_URL SERVICE (memory | SQLITE_PATH)

The checkpointer is `InMemorySaver` or LangGraph's `AsyncSqliteSaver` on the given file; the tap
finds which from the graph (nothing is declared), and beats every 0.3 s.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import aiosqlite
import uvicorn
from ag_ui_langgraph import LangGraphAgent, add_langgraph_fastapi_endpoint
from fastapi import FastAPI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from sidewatch_tap import TapMiddleware
from tests.producers.capture_langgraph import build_graph, one_call_script

BEAT_SECONDS = 0.3


async def main(port: int, url: str, service: str, store: str) -> None:
    saver: Any
    if store == "memory":
        saver = InMemorySaver()
    else:
        saver = AsyncSqliteSaver(await aiosqlite.connect(store))
        await saver.setup()
    app = FastAPI()
    agent = LangGraphAgent(name="demo", graph=build_graph(one_call_script(), checkpointer=saver))
    add_langgraph_fastapi_endpoint(app, agent, "/agent")
    app.add_middleware(TapMiddleware, url=url, service=service, heartbeat_seconds=BEAT_SECONDS)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    await uvicorn.Server(config).serve()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]))
