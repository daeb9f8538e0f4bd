"""What a producer's dialect is to the AG-UI 1.0 grammar: a set of hooks the grammar calls at
fixed points of a unit (an input read, a tool call started or ended, a run's end, the unit's
end), each a no-op here, and the few services of the grammar a dialect may use."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol

from sidewatch.core.vocab import FindingRule, LineKind

if TYPE_CHECKING:
    from ag_ui.core import RunAgentInput

    from sidewatch.core.facts import Fact
    from sidewatch.ingest.outcome import Interrupt


@dataclass(slots=True)
class Call:
    """A tool call of the unit: its arguments are held in memory only until it ends."""

    name: str
    thread_id: str
    run_id: str
    at: int
    seq: int
    args: list[str]


@dataclass(frozen=True, slots=True)
class GatedCall:
    """The call a wait gates by a dialect's own reading: its id, name and digest."""

    call_id: str
    name: str
    digest: str


@dataclass(frozen=True, slots=True)
class Gate:
    """A dialect's reading of what an interrupt gates. `call`: the wait's action instead of
    the call the grammar finds; `receipt`: the gated call's result consumes the decision."""

    call: GatedCall | None
    receipt: bool


@dataclass(frozen=True, slots=True)
class RunEnd:
    """A run's end as the grammar read it. `success`: it ended in success (`cancelled` or
    `interrupt` otherwise); `interrupts`: its 1.0 outcome's, in order."""

    thread: str
    run: str
    at: int
    seq: int
    success: bool
    outcome: Any
    interrupts: tuple[Interrupt, ...] = ()

    @property
    def announced(self) -> list[str]:
        """The ids of the outcome's interrupts, in order."""
        return [it.id for it in self.interrupts]


@dataclass(frozen=True, slots=True)
class Announcement:
    """An interrupt of a run, as read, before the grammar makes it a fact: `expires_raw` is
    the producer's text; `action` and `digest`, a dialect's own reading of the gated call."""

    thread: str
    run: str
    interrupt_id: str
    at: int
    seq: int
    reason: str | None
    tool_call_id: str | None
    expires_raw: str | None = None
    meta: dict[str, Any] | None = None
    action: str | None = None
    digest: str | None = None
    subagent_run_id: str | None = None


class InputStage(IntEnum):
    """Where a dialect's facts of an input go, around the 1.0 `resume[]` answers."""

    BEFORE_RESUME = 0  # answers the producer gave before `resume[]` existed
    AFTER_RESUME = 1
    FINDINGS = 2  # what the answers read so far do, by the producer's rules


class Grammar(Protocol):
    """The grammar's services to a dialect."""

    seq_base: int
    calls: dict[str, Call]  # open tool calls by id

    def emit(self, fact: Fact) -> None: ...

    def finding(
        self, rule: FindingRule, thread: str, run: str, at: int, seq: int, interrupt_id: str | None
    ) -> None: ...

    def at(self, obj: dict[str, Any]) -> int: ...

    def run(self, obj: dict[str, Any], what: str) -> tuple[str, str]: ...

    def announce(self, wait: Announcement) -> None: ...

    def announce_call(
        self, thread: str, run: str, call_id: str, at: int, seq: int, reason: str
    ) -> None: ...

    def end_call(self, call_id: str) -> None: ...

    def ended_call(self, thread: str, run: str, call_id: str) -> tuple[Call, str] | None: ...


Handler = Callable[["Grammar", int, dict[str, Any]], LineKind]


class Dialect:
    """One producer's reading beside AG-UI 1.0. An instance lives for one unit and keeps the
    unit's state of its producer; every hook is optional (a no-op here)."""

    input_stage = InputStage.AFTER_RESUME

    def events(self) -> dict[str, Handler]:
        """The event types it reads, beyond the grammar's: type -> handler."""
        return {}

    def customs(self) -> dict[str, Handler]:
        """The `CUSTOM` events it reads by name (never a `sidewatch.*` one)."""
        return {}

    def input(
        self, g: Grammar, inp: RunAgentInput, thread: str, run: str, at: int, seq: int
    ) -> Sequence[Fact]:
        """The facts of an input, all checked before any is kept (at `input_stage`)."""
        return ()

    def call_started(self, thread: str, run: str, call_id: str) -> None:
        """A tool call began (its name and arguments are the grammar's)."""

    def call_ended(self, call_id: str, call: Call, args: str) -> None:
        """A tool call ended: `args` are its whole arguments, dropped after the hooks."""

    def result(self, thread: str, run: str, call_id: str) -> None:
        """A `TOOL_CALL_RESULT` was read."""

    def gate(self, thread: str, tool_call_id: str | None, meta: dict[str, Any]) -> Gate | None:
        """What an interrupt about to be announced gates, by this producer's reading."""
        return None

    def run_begun(self, g: Grammar, thread: str, run: str) -> None:
        """A unit's line of a run other than the one before it (its input or `RUN_STARTED`):
        what is held for another run of the thread whose end has not come is closed."""

    def run_ending(self, thread: str, run: str, outcome: Any, success: bool) -> None:
        """A `RUN_FINISHED` is being read: checks that reject its line (before any fact)."""

    def run_ended(self, g: Grammar, end: RunEnd) -> bool:
        """A run ended (success, cancelled or interrupt). True: its end line announced a wait
        of this dialect's, and counts as an interrupt."""
        return False

    def finish(self, g: Grammar) -> None:
        """The unit ended: what is held for a run's end that is not in it is left for the
        next units (`openruns.RunHold`), or closed when the unit is read alone."""


HOOKS = (
    "events",
    "customs",
    "input",
    "call_started",
    "call_ended",
    "result",
    "gate",
    "run_begun",
    "run_ending",
    "run_ended",
    "finish",
)


@cache
def plan(kinds: tuple[type[Dialect], ...]) -> dict[str, tuple[int, ...]]:
    """For each hook, the dialects (by index, in order) that have it of their own: the grammar
    calls only those. An input's are split around the 1.0 `resume[]` answers (`before_resume`,
    `after_resume`), each in the order of the dialects' stage."""
    found = {
        hook: tuple(
            i for i, k in enumerate(kinds) if getattr(k, hook) is not getattr(Dialect, hook)
        )
        for hook in HOOKS
    }
    staged = sorted(found["input"], key=lambda i: kinds[i].input_stage)
    after = InputStage.AFTER_RESUME
    found["before_resume"] = tuple(i for i in staged if kinds[i].input_stage < after)
    found["after_resume"] = tuple(i for i in staged if kinds[i].input_stage >= after)
    return found
