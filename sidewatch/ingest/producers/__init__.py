"""The producers' dialects, read beside AG-UI 1.0: one module each, with the hooks it gives
the grammar (`base.Dialect`). Adding a producer is adding its module here, a fixture and a
test; its place in `dialects()` is where its hooks run among the others'."""

from __future__ import annotations

from collections.abc import Sequence

from sidewatch.ingest.openruns import RunHold
from sidewatch.ingest.payload import NO_LABELS, Labels
from sidewatch.ingest.producers.adk import Adk
from sidewatch.ingest.producers.agent_framework import AgentFramework
from sidewatch.ingest.producers.base import Dialect
from sidewatch.ingest.producers.crewai import CrewAI
from sidewatch.ingest.producers.frontend import Frontend
from sidewatch.ingest.producers.langgraph import LangGraph
from sidewatch.ingest.producers.mastra import Mastra
from sidewatch.ingest.producers.on_interrupt import OnInterrupt
from sidewatch.ingest.producers.subagent import Subagents


def dialects(
    labels: Labels = NO_LABELS, frontend_tools: Sequence[str] = (), hold: RunHold | None = None
) -> list[Dialect]:
    """One unit's dialects, in the order their hooks run (at a run's end: crewai's finding,
    the held `on_interrupt` events, ADK's confirmations, then frontend-tool waits). Frontend
    tools are read only when the config names some (`waits.frontendTools`). `hold`: what
    they hold for a run's end across units (None: the unit is read alone)."""
    hold = RunHold() if hold is None else hold
    crewai, langgraph = CrewAI(hold), LangGraph(labels)
    found = [
        crewai,
        OnInterrupt(readers=(crewai, langgraph), hold=hold),  # crewai's object value first
        langgraph,
        Adk(),
        AgentFramework(),
        Mastra(),
        Subagents(),
    ]
    if frontend_tools:
        found.append(Frontend(frontend_tools, labels, hold))
    return found
