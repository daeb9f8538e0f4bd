"""`CUSTOM on_interrupt`, the interrupt event from before AG-UI 1.0's outcome, which
ag-ui-langgraph, ag-ui-crewai and @ag-ui/mastra send, each with a value of its own. An event is
held until its run ends: its id may be known only from the run's 1.0 outcome, and when the
outcome announces the same interrupt, the outcome's richer fact is kept. The run's end may come
in a later unit: what a unit holds is left to the next (`openruns.py`, by thread), and closed
(announced by what it says alone) when the thread's next run begins, or past the bound."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sidewatch.core.vocab import FindingRule, LineKind, RejectReason
from sidewatch.ingest.fields import LineError, check_expiry, checked_or_none
from sidewatch.ingest.openruns import RunHold
from sidewatch.ingest.producers.base import Announcement, Dialect, Grammar, Handler, RunEnd

HOLD = "on_interrupt"  # its records in `openruns`: ((run, held events), ...) of a thread
Held = tuple["LegacyInterrupt", int, int, str | None]  # an event, its time and seq, subagent


@dataclass(frozen=True, slots=True)
class LegacyInterrupt:
    """What an `on_interrupt` value says about the wait (never its message)."""

    interrupt_id: str | None
    reason: str | None
    tool_call_id: str | None
    expires_at: str | None
    action: str | None
    digest: str | None


def nonempty(v: Any) -> str | None:
    """A non-empty string, else None."""
    return v if isinstance(v, str) and v else None


class Reader(Protocol):
    """A producer's reading of the event's value."""

    def read_on_interrupt(self, value: Any, raw_event: Any) -> LegacyInterrupt | None:
        """The interrupt, if the value is this producer's."""

    def held(self, thread: str, run: str, it: LegacyInterrupt, value: Any) -> None:
        """An interrupt it read passed the line's checks and is held for its run's end."""


class OnInterrupt(Dialect):
    """Reads the event with the first of its `readers` that knows the value."""

    def __init__(self, readers: Sequence[Reader], hold: RunHold | None = None) -> None:
        self.readers = tuple(readers)
        self.hold = RunHold() if hold is None else hold
        # the held events per run, until the run's end says what their ids are (the
        # event's `subagentRunId` beside it: ag-ui-langgraph attributes the event itself)
        self._held: dict[tuple[str, str], list[Held]] = {}
        self._threads: set[str] = set()  # those whose held events earlier units left are here
        self._ended: set[tuple[str, str]] = set()  # the runs this unit ended

    def _thread(self, thread: str) -> None:
        """The thread's events held by earlier units, taken the first time (before this
        unit's: they came first)."""
        if thread in self._threads:
            return
        self._threads.add(thread)
        for run, events in self.hold.take(HOLD, thread) or ():
            self._held[(thread, run)] = [*events, *self._held.get((thread, run), [])]

    def customs(self) -> dict[str, Handler]:
        return {"on_interrupt": self.on_interrupt}

    def on_interrupt(self, g: Grammar, n: int, obj: dict[str, Any]) -> LineKind:
        thread, run = g.run(obj, "CUSTOM on_interrupt")
        value, raw_event = obj.get("value"), obj.get("rawEvent")
        reader, it = next(
            (r, i) for r in self.readers if (i := r.read_on_interrupt(value, raw_event)) is not None
        )
        checked_or_none(it.interrupt_id, "CUSTOM on_interrupt: rawEvent.id")
        checked_or_none(it.reason, "CUSTOM on_interrupt: value.reason")
        checked_or_none(it.tool_call_id, "CUSTOM on_interrupt: value.toolCallId")
        checked_or_none(it.action, "CUSTOM on_interrupt: value.action_requests.0.name")
        check_expiry(it.expires_at, "CUSTOM on_interrupt: value.expiresAt")
        sub = obj.get("subagentRunId")
        if sub is not None and not isinstance(sub, str):
            raise LineError(
                RejectReason.INVALID_FIELD, "CUSTOM on_interrupt: subagentRunId: must be a string"
            )
        checked_or_none(sub, "CUSTOM on_interrupt: subagentRunId")
        self._thread(thread)
        self._held.setdefault((thread, run), []).append((it, g.at(obj), g.seq_base + n, sub))
        reader.held(thread, run, it, value)
        return LineKind.INTERRUPT

    def run_begun(self, g: Grammar, thread: str, run: str) -> None:
        """The thread moved on to another run: the events of its runs not ended are
        announced by what they say (as if the stream of each ended there)."""
        self._thread(thread)
        for t, r in [k for k in self._held if k[0] == thread and k[1] != run]:
            self._flush(g, t, r, [])

    def run_ended(self, g: Grammar, end: RunEnd) -> bool:
        self._thread(end.thread)
        self._ended.add((end.thread, end.run))
        self._flush(g, end.thread, end.run, end.announced)
        return False

    def finish(self, g: Grammar) -> None:
        """Runs whose end is not in this unit: their events are left for the next units
        (announced now when the unit is read alone, or when they came after their run's end
        in it); those the bound pushed out, announced."""
        for thread in self.hold.closed(HOLD):  # a closing unit takes every thread's
            self._thread(thread)
        for thread, held in self.hold.overdue(HOLD):
            for run, events in held:
                self._held[(thread, run)] = [*events, *self._held.get((thread, run), [])]
                self._flush(g, thread, run, [])
        for thread, run in list(self._held):
            if self.hold.alone or (thread, run) in self._ended:  # no end is to come
                self._flush(g, thread, run, [])
        if self.hold.alone:
            return
        by_thread: dict[str, list[tuple[str, tuple[Held, ...]]]] = {t: [] for t in self._threads}
        for (thread, run), events in self._held.items():
            by_thread.setdefault(thread, []).append((run, tuple(events)))
        for thread, runs in by_thread.items():
            self.hold.leave(HOLD, thread, tuple(runs))

    def _flush(self, g: Grammar, thread: str, run: str, announced: list[str]) -> None:
        """Announce the run's held interrupts (`announced`: the ids of its 1.0 outcome, in
        order). The n-th one without an id is the outcome's n-th interrupt, else
        `{runId}#{n}`, with a finding."""
        unnamed = 0
        for it, at, seq, sub in self._held.pop((thread, run), []):
            interrupt_id = it.interrupt_id
            if interrupt_id is None:
                unnamed += 1
                if unnamed <= len(announced):
                    interrupt_id = announced[unnamed - 1]
                else:
                    interrupt_id = f"{run}#{unnamed}"
                    g.finding(
                        FindingRule.LEGACY_INTERRUPT_WITHOUT_ID, thread, run, at, seq, interrupt_id
                    )
            if interrupt_id in announced:
                continue  # the outcome says it all, and more
            g.announce(
                Announcement(
                    thread,
                    run,
                    interrupt_id,
                    at,
                    seq,
                    it.reason,
                    it.tool_call_id,
                    expires_raw=it.expires_at,
                    action=it.action,
                    digest=it.digest,
                    subagent_run_id=sub,
                )
            )
