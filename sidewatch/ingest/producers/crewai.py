"""ag-ui-crewai, where it contradicts AG-UI 1.0. By default a crewai `@human_feedback` pause is
announced by `CUSTOM on_interrupt` whose `value` is the AG-UI Interrupt *object* (`id`,
`reason`, `message`, `responseSchema`, `metadata.crewai`), not a JSON string, with no
`rawEvent`, and then a plain `RUN_FINISHED`. The id is the flow id, which the bridge sets to the
thread id: every pause of a thread reuses it. Answers are the step's outcome labels
(`responseSchema.enum`); a cancel is sent to crewai as empty feedback, which it resolves to the
step's first outcome."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sidewatch.core.facts import Fact, FindingFact
from sidewatch.core.model import Code
from sidewatch.core.vocab import FindingRule
from sidewatch.ingest.openruns import RunHold
from sidewatch.ingest.payload import decision_of
from sidewatch.ingest.producers.base import Dialect, Grammar, InputStage, RunEnd
from sidewatch.ingest.producers.on_interrupt import LegacyInterrupt, nonempty

if TYPE_CHECKING:
    from ag_ui.core import RunAgentInput


def is_crewai(value: Any, meta: Any = None) -> bool:
    """An `on_interrupt` value (or a 1.0 interrupt's metadata) of ag-ui-crewai."""
    if isinstance(value, dict):
        meta = value.get("metadata")
    return isinstance(meta, dict) and isinstance(meta.get("crewai"), dict)


def crewai_interrupt(value: Any) -> LegacyInterrupt | None:
    """Read an `on_interrupt` whose value is the Interrupt object itself (ag-ui-crewai);
    `None` for any other value (ag-ui-langgraph's JSON string)."""
    if not isinstance(value, dict) or not is_crewai(value):
        return None
    interrupt_id = value.get("id")
    return LegacyInterrupt(
        interrupt_id=interrupt_id if isinstance(interrupt_id, str) and interrupt_id else None,
        reason=nonempty(value.get("reason")),
        tool_call_id=nonempty(value.get("toolCallId")),
        expires_at=nonempty(value.get("expiresAt")),
        action=None,
        digest=None,
    )


def first_outcome_decision(schema: Any) -> Code | None:
    """The decision the first label of a `responseSchema.enum` reads as (the label is then
    dropped): what crewai runs on a cancel (`None`: no labels, so crewai's own default)."""
    labels = schema.get("enum") if isinstance(schema, dict) else None
    if not isinstance(labels, list) or not labels or not isinstance(labels[0], str):
        return None
    return decision_of(labels[0]).code


HOLD = "crewai"  # its records in `openruns`: (held pauses by run, known pauses) of a thread


class CrewAI(Dialect):
    """Its pauses are held per run until the run's end, and then known by (thread, interrupt
    id) -> (the run that announced it last, what a cancel of it runs); both across units
    (`openruns.py`, by thread: ids and codes only)."""

    input_stage = InputStage.FINDINGS

    def __init__(self, hold: RunHold | None = None) -> None:
        self.hold = RunHold() if hold is None else hold
        self._held: dict[tuple[str, str], list[tuple[str, Code | None]]] = {}
        self._known: dict[tuple[str, str], tuple[str, Code | None]] = {}
        self._threads: set[str] = set()  # those whose records earlier units left are here

    def _thread(self, thread: str) -> None:
        """The thread's pauses held or known by earlier units, taken the first time."""
        if thread in self._threads:
            return
        self._threads.add(thread)
        held, known = self.hold.take(HOLD, thread) or ((), ())
        for run, pauses in held:
            self._held[(thread, run)] = [*pauses, *self._held.get((thread, run), [])]
        for interrupt_id, run, first in known:
            self._known.setdefault((thread, interrupt_id), (run, first))

    def run_begun(self, g: Grammar, thread: str, run: str) -> None:
        """The thread moved on: the pauses of its runs not ended are dropped, as a unit's
        end once dropped them (their run's end would have said they ended in success)."""
        self._thread(thread)
        for key in [k for k in self._held if k[0] == thread and k[1] != run]:
            del self._held[key]

    def finish(self, g: Grammar) -> None:
        """Left for the next units: held pauses by run, known ones by id."""
        for thread in self.hold.closed(HOLD):  # a closing unit takes every thread's
            self._thread(thread)
        self.hold.overdue(HOLD)  # pushed out by the bound: nothing is announced by them
        if self.hold.alone:
            return
        held: dict[str, list[Any]] = {t: [] for t in self._threads}
        known: dict[str, list[Any]] = {t: [] for t in self._threads}
        for (thread, run), pauses in self._held.items():
            held.setdefault(thread, []).append((run, tuple(pauses)))
        for (thread, interrupt_id), (run, first) in self._known.items():
            known.setdefault(thread, []).append((interrupt_id, run, first))
        for thread in {*held, *known}:
            h, k = tuple(held.get(thread, ())), tuple(known.get(thread, ()))
            self.hold.leave(HOLD, thread, (h, k) if h or k else ())

    def read_on_interrupt(self, value: Any, raw_event: Any) -> LegacyInterrupt | None:
        return crewai_interrupt(value) if raw_event is None else None

    def held(self, thread: str, run: str, it: LegacyInterrupt, value: Any) -> None:
        self._thread(thread)
        if it.interrupt_id is not None:
            first = first_outcome_decision(value.get("responseSchema"))
            self._held.setdefault((thread, run), []).append((it.interrupt_id, first))

    def input(
        self, g: Grammar, inp: RunAgentInput, thread: str, run: str, at: int, seq: int
    ) -> Sequence[Fact]:
        """A cancel of a crewai pause is sent to crewai as empty feedback, which it resolves
        to the step's first outcome: a finding, unless that outcome is a decline."""
        found: list[Fact] = []
        self._thread(thread)
        for entry in inp.resume or ():
            known = self._known.get((thread, entry.interrupt_id))
            if entry.status == "cancelled" and known is not None and known[1] is not Code.DECLINE:
                found.append(
                    FindingFact(
                        rule=FindingRule.CANCEL_RUNS_FIRST_OUTCOME,
                        at=at,
                        seq=seq,
                        thread_id=thread,
                        run_id=known[0],
                        interrupt_id=entry.interrupt_id,
                    )
                )
        return found

    def run_ended(self, g: Grammar, end: RunEnd) -> bool:
        """At a run's end, its pauses are known (for a later cancel of them); a run that
        paused and still ended in success (ag-ui-crewai's default) is a finding."""
        thread, run = end.thread, end.run
        self._thread(thread)
        for it in end.interrupts:  # ag-ui-crewai's opt-in 1.0 outcome
            if is_crewai(None, it.metadata):
                self._known[(thread, it.id)] = (run, first_outcome_decision(it.response_schema))
        for interrupt_id, first in self._held.pop((thread, run), []):
            self._known[(thread, interrupt_id)] = (run, first)
            if end.success:
                g.finding(
                    FindingRule.INTERRUPT_REPORTED_AS_SUCCESS,
                    thread,
                    run,
                    end.at,
                    end.seq,
                    interrupt_id,
                )
        return False
