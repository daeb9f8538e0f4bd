"""An input with no `timestamp` takes its run's start time (pydantic-ai stamps its events but
not the `RunAgentInput` it was posted): the ingest time, after the whole stream, would put the
input's answers after the run that consumed them. Within a unit, the input's facts are retimed
before they are stored. Across units (the input in one, its `RUN_STARTED` in a later one), the
input's facts are stored with the ingest time, provisional; the run is remembered
(`openruns.py`: thread and run ids only) and its `RUN_STARTED` asks the store to retime them
in its own unit's transaction (`Retime`, store.retime), as one stream read whole would have
timed them. Memory only: a daemon restarted between the two units leaves the ingest time."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from sidewatch.ingest.openruns import RunHold

if TYPE_CHECKING:
    from sidewatch.core.facts import Fact

HOLD = "untimed"  # its records in `openruns`: the runs of a thread with an untimed input stored
# A thread has one run asking at a time; a few more kept for inputs posted ahead of their runs.
MAX_RUNS = 8


@dataclass(frozen=True, slots=True)
class Retime:
    """The stored facts of a run's untimed input (an earlier unit's) take its start time."""

    thread_id: str
    run_id: str
    at: int


class UntimedInputs:
    """One unit's untimed inputs: where their facts are in the unit's `facts`, and the runs
    earlier units stored with a provisional time (taken from `hold` the first time the unit
    touches their thread, left back at its end)."""

    def __init__(self, hold: RunHold) -> None:
        self.hold = hold
        self._spans: dict[tuple[str, str], tuple[int, int]] = {}  # this unit's, in `facts`
        self._held: dict[str, list[str]] = {}  # thread -> runs stored untimed earlier
        self.retimes: list[Retime] = []  # for the store, in this unit's transaction

    def _thread(self, thread: str) -> list[str]:
        runs = self._held.get(thread)
        if runs is None:
            runs = self._held[thread] = list(self.hold.take(HOLD, thread) or ())
        return runs

    def input(self, thread: str, run: str, start: int, end: int) -> None:
        """The facts `facts[start:end]` are an input of `run` with no time."""
        self._thread(thread)
        self._spans[(thread, run)] = (start, end)

    def started(self, thread: str, run: str, at: int | None, facts: list[Fact]) -> None:
        """`run` started at `at` (None: its `RUN_STARTED` has no time either): its untimed
        input's facts take that time, in `facts` when this unit holds them, else in the
        store."""
        runs = self._thread(thread)
        span = self._spans.pop((thread, run), None)
        stored = run in runs
        if stored:
            runs.remove(run)
        if at is None:
            return
        if span is not None:
            for i in range(*span):
                facts[i] = replace(facts[i], at=at)
        if stored:  # also when this unit brought the input again: the stored facts are the first
            self.retimes.append(Retime(thread, run, at))

    def finish(self) -> None:
        """Left for the next units: every thread's runs whose input has no time yet."""
        for thread in self.hold.closed(HOLD):  # a closing unit: the ingest time stays
            self._thread(thread)
            self._held[thread] = []
        for thread, _ in self.hold.overdue(HOLD):  # pushed out by the bound: likewise
            self._held.pop(thread, None)
        if self.hold.alone:
            return
        for (thread, run), _ in self._spans.items():
            runs = self._thread(thread)
            if run not in runs:
                runs.append(run)
        for thread, runs in self._held.items():
            self.hold.leave(HOLD, thread, tuple(runs[-MAX_RUNS:]))
