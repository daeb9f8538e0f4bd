"""The durability adapters on the frameworks' own objects, and what the tap binds a wait with:
found from the app it serves (LangGraph's checkpointer, ADK's session service), or declared."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import aiosqlite
import httpx
import pytest
from ag_ui_adk import ADKAgent, add_adk_fastapi_endpoint
from ag_ui_langgraph import LangGraphAgent, add_langgraph_fastapi_endpoint
from fastapi import FastAPI
from google.adk.sessions import BaseSessionService, InMemorySessionService
from langgraph.checkpoint.memory import InMemorySaver, MemorySaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from sidewatch_tap import TapMiddleware, durable_of
from sidewatch_tap.live import durable_of_app
from tests.producers.capture_adk import ONE_CALL, make_adk_agent, make_agent
from tests.producers.capture_langgraph import build_graph, one_call_script
from tests.tap.test_tap import _Serve, agent_input, interrupt_id_of


def _langgraph_app(checkpointer: Any) -> FastAPI:
    app = FastAPI()
    graph = build_graph(one_call_script(), checkpointer=checkpointer)
    add_langgraph_fastapi_endpoint(app, LangGraphAgent(name="demo", graph=graph), "/agent")
    return app


def test_langgraph_in_memory_savers_are_not_durable_and_a_sqlite_saver_is(tmp_path: Path) -> None:
    async def found() -> tuple[dict[str, tuple[bool | None, bool | None]], tuple[Any, Any]]:
        async with aiosqlite.connect(tmp_path / "cp.sqlite") as conn:
            saver = AsyncSqliteSaver(conn)
            savers = (("in-memory", InMemorySaver()), ("memory", MemorySaver()), ("sqlite", saver))
            each = {
                name: (durable_of(cp), durable_of(build_graph(one_call_script(), checkpointer=cp)))
                for name, cp in savers
            }
            apps = (
                durable_of_app(_langgraph_app(InMemorySaver())),
                durable_of_app(_langgraph_app(saver)),
            )
            return each, apps

    each, apps = asyncio.run(found())

    assert {
        "in-memory": (False, False),
        "memory": (False, False),
        "sqlite": (True, True),
    } == each
    assert (False, True) == apps  # from the agent the endpoint serves


class _StoredSessions(BaseSessionService):
    """A session service of the deployment's own (a database one, say): not in memory."""

    async def create_session(self, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def get_session(self, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def list_sessions(self, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def delete_session(self, **kwargs: Any) -> Any:
        raise NotImplementedError


@pytest.mark.filterwarnings("ignore:\\[EXPERIMENTAL\\]:UserWarning")  # ADK's in-memory services
def test_adk_in_memory_sessions_are_not_durable_and_another_service_is() -> None:
    database = _StoredSessions()
    durable = ADKAgent(
        adk_agent=make_adk_agent(ONE_CALL),
        app_name="demo_app",
        user_id="demo_user",
        session_service=database,
    )
    app = FastAPI()
    add_adk_fastapi_endpoint(app, make_agent(ONE_CALL), "/agent")

    assert (False, True) == (durable_of(InMemorySessionService()), durable_of(database))
    assert (False, True) == (durable_of(make_agent(ONE_CALL)), durable_of(durable))
    assert durable_of_app(app) is False


class _Lines:
    """A stand-in for the Tap: keeps what would be sent."""

    def __init__(self) -> None:
        self.events: list[dict] = []

    def record(self, event: dict, thread_id: str | None, run_id: str | None) -> None:
        pass

    def record_line(self, line: bytes) -> None:
        self.events.append(json.loads(line))

    def heartbeats(self) -> list[dict]:
        return [e["value"] for e in self.events if e.get("name") == "sidewatch.heartbeat"]


@pytest.mark.parametrize("declared", [None, True])
def test_the_tap_binds_the_wait_it_raised_with_the_durability_found_or_declared(
    declared: bool | None,
) -> None:
    lines = _Lines()
    app = TapMiddleware(
        _langgraph_app(InMemorySaver()),
        tap=lines,  # type: ignore[arg-type]
        service="billing",
        durable=declared,
        heartbeat_seconds=60,
    )
    thread = f"dur-{uuid.uuid4().hex[:8]}"

    with _Serve(app) as agent:
        answer = httpx.post(f"{agent}/agent", json=agent_input(thread), timeout=30)
    interrupt_id_of(answer.text)
    beats = lines.heartbeats()
    bound = [b for b in beats if "threadId" in b]

    assert [(thread, "run-1", "billing", bool(declared))] == [
        (b["threadId"], b["runId"], b["service"], b["durable"]) for b in bound
    ]
    assert {bound[0]["instance"]} == {b["instance"] for b in beats}
    assert any("threadId" not in b for b in beats)  # and the instance beats


@pytest.mark.filterwarnings("ignore:\\[EXPERIMENTAL\\]:UserWarning")  # ADK's in-memory services
@pytest.mark.filterwarnings("ignore:Non-resumable HITL:DeprecationWarning")  # its default mode
def test_an_adk_confirmation_behind_the_tap_is_bound_in_memory() -> None:
    app = FastAPI()
    add_adk_fastapi_endpoint(app, make_agent(ONE_CALL), "/agent")
    lines = _Lines()
    thread = f"dur-{uuid.uuid4().hex[:8]}"
    run = agent_input(thread, messages=[{"id": "u1", "role": "user", "content": "Delete it."}])

    with _Serve(TapMiddleware(app, tap=lines, heartbeat_seconds=60)) as agent:  # type: ignore[arg-type]
        httpx.post(f"{agent}/agent", json=run, timeout=60)
    bound = [b for b in lines.heartbeats() if "threadId" in b]

    assert [(thread, False)] == [(b["threadId"], b["durable"]) for b in bound]
