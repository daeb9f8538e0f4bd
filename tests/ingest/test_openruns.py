"""What a run's end decides of what came before it, held across units (`openruns.py`): an
`on_interrupt` event waits for its run's end in a later unit, a unit not committed leaves what
was held as it was, past the bound a held event is announced, never lost, and so is what is
held when no later unit can come (the end of `sidewatch ingest`, a daemon stopping)."""

from __future__ import annotations

from typing import Any

import orjson

from sidewatch.app.audit import audit
from sidewatch.app.ingest import Ingest
from sidewatch.config import Config
from sidewatch.core.facts import FindingFact, InterruptFact
from sidewatch.core.policy import DEFAULT_POLICY
from sidewatch.core.vocab import FindingRule
from sidewatch.ingest.agui import Interpreter, UnitResult
from sidewatch.ingest.digest import RefProtector
from sidewatch.ingest.openruns import OpenRuns
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store

RECEIVED = 1_785_081_600_000
PROTECT = RefProtector(b"test-key", ("role:", "policy:"))


def line(typ: str, thread: str = "t1", run: str = "r1", **fields: Any) -> bytes:
    return orjson.dumps({"type": typ, "threadId": thread, "runId": run, **fields})


def held(thread: str = "t1", run: str = "r1") -> bytes:
    """ag-ui-langgraph's event without an id: the run's outcome names it."""
    return line("CUSTOM", thread, run, name="on_interrupt", value="{}")


def end(thread: str = "t1", run: str = "r1") -> bytes:
    outcome = {"type": "interrupt", "interrupts": [{"id": "i1", "reason": "tool_approval"}]}
    return line("RUN_FINISHED", thread, run, outcome=outcome)


def unit(runs: OpenRuns | None, *lines: bytes, settle: bool = True) -> UnitResult:
    interp = Interpreter(RECEIVED, 0, PROTECT, open_runs=runs)
    res = interp.read_chunks([list(lines)])
    if settle:
        interp.hold.settle()
    return res


def waits(res: UnitResult) -> list[str]:
    return [f.interrupt_id for f in res.facts if isinstance(f, InterruptFact)]


def findings(res: UnitResult) -> list[str]:
    return [f.rule for f in res.facts if isinstance(f, FindingFact)]


def test_an_event_waits_for_its_runs_end_in_a_later_unit() -> None:
    runs = OpenRuns()
    first = unit(runs, line("RUN_STARTED"), held())
    assert ([], 1) == (waits(first), len(runs))
    second = unit(runs, end())
    # the outcome names it: one wait, no `legacy_interrupt_without_id`
    assert (["i1"], [], 0) == (waits(second), findings(second), len(runs))


def test_a_unit_read_alone_announces_what_it_holds_at_its_end() -> None:
    res = unit(None, line("RUN_STARTED"), held())
    assert (["r1#1"], [FindingRule.LEGACY_INTERRUPT_WITHOUT_ID]) == (waits(res), findings(res))


def test_a_unit_not_committed_leaves_the_held_event_as_it_was() -> None:
    runs = OpenRuns()
    unit(runs, line("RUN_STARTED"), held())
    unit(runs, end(), settle=False)  # rolled back
    assert ["i1"] == waits(unit(runs, end()))


def test_the_threads_next_run_announces_the_event_of_a_run_never_ended() -> None:
    runs = OpenRuns()
    unit(runs, line("RUN_STARTED"), held())
    res = unit(runs, line("RUN_STARTED", run="r2"))
    assert (["r1#1"], 0) == (waits(res), len(runs))


def test_past_the_bound_the_oldest_event_is_announced_by_the_next_unit() -> None:
    runs = OpenRuns(max_records=2)
    for thread in ("a", "b", "c"):
        unit(runs, line("RUN_STARTED", thread), held(thread))
    assert 3 == len(runs)  # two held, one overdue
    res = unit(runs, line("RUN_STARTED", "d", "x"))
    assert ["r1#1"] == waits(res)
    assert [("a", "r1#1")] == [
        (f.thread_id, f.interrupt_id) for f in res.facts if isinstance(f, InterruptFact)
    ]
    assert 2 == len(runs)


def test_a_closing_unit_announces_what_every_thread_holds() -> None:
    runs = OpenRuns()
    unit(runs, line("RUN_STARTED", "a"), held("a"), line("RUN_STARTED", "b"), held("b"))
    interp = Interpreter(RECEIVED, 0, PROTECT, open_runs=runs, closing=True)
    res = interp.read_chunks([])
    interp.hold.settle()
    assert (["a", "b"], 0) == (
        sorted(f.thread_id for f in res.facts if isinstance(f, InterruptFact)),
        len(runs),
    )


def test_ingest_closes_what_is_held_when_no_later_unit_can_end_it(db_url: str) -> None:
    """A body whose run never ends holds its event (a later body may end the run); at the end
    of `sidewatch ingest`, or when the daemon stops, it is announced, not lost."""
    engine = open_store(db_url)
    store = Store(engine)
    ingest = Ingest(store, PROTECT, Config())
    ingest.body("test", line("RUN_STARTED") + b"\n" + held() + b"\n", RECEIVED)
    before = [a.verdict.request_id for a in audit(store, (DEFAULT_POLICY,), RECEIVED + 1_000)]
    closed = ingest.close_held("shutdown", RECEIVED + 500)
    after = [a.verdict.request_id for a in audit(store, (DEFAULT_POLICY,), RECEIVED + 1_000)]
    again = ingest.close_held("shutdown", RECEIVED + 600)
    engine.dispose()

    assert ([], ["t1/r1#1"], None) == (before, after, again)
    assert closed is not None and () == closed.rejects
