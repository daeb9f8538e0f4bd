"""Subagents (AG-UI 1.0's `SUBAGENT_STARTED`, `SUBAGENT_FINISHED` and `SUBAGENT_ERROR`, which
ag-ui-langgraph sends for a subgraph): their ids, name and state, never their content. A
suspended subagent opens no wait of its own; its interrupts are the parent run's."""

from __future__ import annotations

from typing import Any

import orjson

from sidewatch.core.facts import SubagentFact
from sidewatch.core.model import SubagentState
from sidewatch.core.vocab import LineKind, RejectReason
from sidewatch.ingest.bounds import ENTRIES_MAX
from sidewatch.ingest.fields import LineError, checked, valid
from sidewatch.ingest.producers.base import Dialect, Grammar, Handler


class Subagents(Dialect):
    """Each event is a fact of the run in context."""

    def events(self) -> dict[str, Handler]:
        return {
            "SUBAGENT_STARTED": self.started,
            "SUBAGENT_FINISHED": self.finished,
            "SUBAGENT_ERROR": self.error,
        }

    def started(self, g: Grammar, n: int, obj: dict[str, Any]) -> LineKind:
        at = g.at(obj)
        from ag_ui.core import SubagentStartedEvent  # noqa: PLC0415 (the models load only when needed)

        ev = valid(SubagentStartedEvent, obj, "SUBAGENT_STARTED")
        name = checked(ev.name, "SUBAGENT_STARTED: name")  # the description is not kept
        sub = ev.subagent_run_id
        return _fact(g, n, obj, "SUBAGENT_STARTED", sub, at, SubagentState.RUNNING, name=name)

    def finished(self, g: Grammar, n: int, obj: dict[str, Any]) -> LineKind:
        at = g.at(obj)
        from ag_ui.core import (  # noqa: PLC0415 (the models load only when needed)
            SubagentFinishedEvent,
            SubagentFinishedSuspendedOutcome,
        )

        ev = valid(SubagentFinishedEvent, obj, "SUBAGENT_FINISHED")  # its result is not kept
        if not isinstance(ev.outcome, SubagentFinishedSuspendedOutcome):
            sub = ev.subagent_run_id
            return _fact(g, n, obj, "SUBAGENT_FINISHED", sub, at, SubagentState.FINISHED)
        ids = tuple(
            checked(i, f"SUBAGENT_FINISHED: outcome.interruptIds.{k}")
            for k, i in enumerate(ev.outcome.interrupt_ids or ())
        )
        if len(orjson.dumps(ids)) > ENTRIES_MAX:
            raise LineError(
                RejectReason.INVALID_FIELD,
                f"SUBAGENT_FINISHED: outcome.interruptIds: more than the store holds "
                f"({ENTRIES_MAX} bytes of JSON)",
            )
        return _fact(
            g, n, obj, "SUBAGENT_FINISHED", ev.subagent_run_id, at, SubagentState.SUSPENDED, ids
        )

    def error(self, g: Grammar, n: int, obj: dict[str, Any]) -> LineKind:
        at = g.at(obj)
        from ag_ui.core import SubagentErrorEvent  # noqa: PLC0415 (the models load only when needed)

        ev = valid(SubagentErrorEvent, obj, "SUBAGENT_ERROR")  # its message is not kept
        return _fact(g, n, obj, "SUBAGENT_ERROR", ev.subagent_run_id, at, SubagentState.ERROR)


def _fact(
    g: Grammar,
    n: int,
    obj: dict[str, Any],
    what: str,
    subagent_run_id: str,
    at: int,
    state: SubagentState,
    interrupt_ids: tuple[str, ...] = (),
    name: str | None = None,
) -> LineKind:
    """A subagent's event as a fact of the run in context."""
    sub = checked(subagent_run_id, f"{what}: subagentRunId")
    thread, run = g.run(obj, what)
    g.emit(
        SubagentFact(
            thread_id=thread,
            run_id=run,
            subagent_run_id=sub,
            state=state,
            at=at,
            seq=g.seq_base + n,
            name=name,
            interrupt_ids=interrupt_ids,
        )
    )
    return LineKind.SUBAGENT
