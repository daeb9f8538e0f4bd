"""Liveness and durability: the tap's heartbeats, one per service instance, and the adapters that
tell whether an interrupted run outlives the agent process.

While the process runs, the tap sends `sidewatch.heartbeat` `{service, instance, durable}` every
`heartbeat_seconds` (one line for the whole process, however many waits it holds), and binds each
wait it raised to its instance with `{threadId, runId, service, instance, durable}` when it
reports the interrupt's delivery. sidewatch keeps a durable wait alive by any beat of the service
(another replica, the restarted process) and an in-memory one only by its own instance's beats,
so a dead in-memory process leaves its waits `ORPHANED` once `heartbeatFreshness` has passed.

Durability, by the framework (duck-typed: the tap imports neither):
- LangGraph: the graph's checkpointer; `InMemorySaver`/`MemorySaver` is in-memory, any other
  `BaseCheckpointSaver` (Postgres, SQLite, ...) durable.
- ADK: the session service; `InMemorySessionService` is in-memory, any other durable.
A `durable=True/False` given to the tap wins; with neither found nor given, waits are bound as
in-memory (kept alive by this process only: the claim that cannot be wrong).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import uuid
from collections.abc import Iterable
from typing import Any, Protocol

from sidewatch_tap.evidence import evidence_line

__all__ = ["Liveness", "durable_of", "durable_of_app", "instance_id"]

log = logging.getLogger("sidewatch_tap")

HEARTBEAT_SECONDS = 30.0  # well inside the default heartbeatFreshness (10 minutes)
SERVICE_ENV = "SIDEWATCH_SERVICE"
DEFAULT_SERVICE = "agent"
_IN_MEMORY_SAVERS = frozenset({"InMemorySaver", "MemorySaver"})
_instances: dict[int, str] = {}  # pid -> instance
_lock = threading.Lock()


class _Lines(Protocol):
    def record_line(self, line: bytes) -> None: ...


def instance_id() -> str:
    """This process's instance: new in every process (a restart, a forked worker)."""
    pid = os.getpid()
    with _lock:
        if pid not in _instances:
            _instances.clear()
            _instances[pid] = f"{socket.gethostname()[:64]}-{pid}-{uuid.uuid4().hex[:12]}"
        return _instances[pid]


def _names(obj: Any) -> set[str]:
    return {c.__name__ for c in type(obj).__mro__}


def durable_of(obj: Any, depth: int = 0) -> bool | None:
    """Whether the run state `obj` keeps outlives the process: a LangGraph checkpointer, graph
    or `LangGraphAgent`; an ADK session service, `Runner` or ag-ui-adk `ADKAgent`. None: not
    one of these, or one without a checkpointer."""
    if depth > 4:
        return None
    names = _names(obj)
    if "BaseCheckpointSaver" in names:
        return not (names & _IN_MEMORY_SAVERS)
    if "BaseSessionService" in names:
        inner = getattr(obj, "_inner", None)  # ag-ui-adk's RequestStateSessionService wraps one
        if inner is not None and inner is not obj:
            return durable_of(inner, depth + 1)
        return "InMemorySessionService" not in names
    for attr in ("checkpointer", "graph", "session_service", "_session_service"):
        value = getattr(obj, attr, None)
        if value is not None and value is not obj and not isinstance(value, bool):
            found = durable_of(value, depth + 1)
            if found is not None:
                return found
    manager = getattr(obj, "_session_manager", None)  # ag-ui-adk's ADKAgent
    if manager is not None:
        return durable_of(manager, depth + 1)
    return None


def durable_of_app(app: Any) -> bool | None:
    """The durability of the agents an ASGI app serves, found in its routes' endpoints (the
    agent ag-ui-langgraph's and ag-ui-adk's endpoints close over): durable only if all are."""
    found: list[bool] = []
    for route in _routes(app):
        endpoint = getattr(route, "endpoint", None)
        for cell in getattr(endpoint, "__closure__", None) or ():
            with contextlib.suppress(ValueError):  # an empty cell
                value = durable_of(cell.cell_contents)
                if value is not None:
                    found.append(value)
    return all(found) if found else None


def _routes(app: Any, depth: int = 0) -> Iterable[Any]:
    if depth > 4:
        return
    routes = getattr(app, "routes", None)
    if isinstance(routes, list):
        for route in routes:
            yield route
            if getattr(route, "app", None) is not None and hasattr(route.app, "routes"):
                yield from _routes(route.app, depth + 1)


class Liveness:
    """The heartbeats of one service instance, from a daemon thread, and its bindings."""

    def __init__(
        self,
        tap: _Lines,
        service: str | None = None,
        durable: bool | None = None,
        heartbeat_seconds: float = HEARTBEAT_SECONDS,
    ) -> None:
        self.tap = tap
        self.service = service or os.environ.get(SERVICE_ENV) or DEFAULT_SERVICE
        self.declared = durable
        self.durable = bool(durable)
        self.found = durable is not None
        self.heartbeat_seconds = heartbeat_seconds
        self.beats = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def discover(self, app: Any) -> None:
        """Learn the durability from the app, once (a declaration wins)."""
        if self.found:
            return
        self.found = True
        with contextlib.suppress(Exception):
            found = durable_of_app(app)
            if found is not None:
                self.durable = found

    def start(self) -> None:
        with self._start_lock:
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(
                    target=self._run, name="sidewatch-tap-heartbeat", daemon=True
                )
                self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _value(self) -> dict[str, Any]:
        return {"service": self.service, "instance": instance_id(), "durable": self.durable}

    def beat(self) -> None:
        self.tap.record_line(evidence_line("heartbeat", self._value()))
        self.beats += 1

    def bind(self, thread: str, run: str | None) -> None:
        """The wait(s) raised on `thread` by `run` are held by this instance."""
        value: dict[str, Any] = {"threadId": thread}
        if run is not None:
            value["runId"] = run
        value.update(self._value())
        self.tap.record_line(evidence_line("heartbeat", value))

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.beat()
            except Exception:  # the tap never fails the agent
                log.exception("sidewatch tap: could not queue a heartbeat")
            self._stop.wait(self.heartbeat_seconds)
