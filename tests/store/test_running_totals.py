"""The store-wide totals (`running_total`, store.sql.add_totals) on SQLite and PostgreSQL: the
findings by rule, lines by kind and rejects by reason a tick exports equal the rows' own
counts plus what retention pruned, after ingest, audit, findings noticed twice, pruning, two
writers racing for one finding, and a restart; and a tick reads them without counting the
finding, line_count or reject tables (a cost that grew with the store's age)."""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event, text

from sidewatch.app.audit import Auditor
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.app.prune import Retention
from sidewatch.config import Config
from sidewatch.core.facts import FindingFact
from sidewatch.store.repo import Store
from tests.app.test_auditor import counters
from tests.app.test_prune import MIN, NOW, POLICIES, T0, WEEK, history, ingest

CREWAI = (
    Path(__file__).resolve().parents[1]
    / "ingest"
    / "producers"
    / "fixtures"
    / "crewai-cancel-default.ndjson"
).read_bytes()


def crewai(store: Store, thread: str, at: int) -> None:
    """A crewai pause cancelled: two findings noticed at ingest (reported as success, cancel
    runs the first outcome), none of them from a verdict."""
    body = CREWAI.replace(b"thread-crewai-cancel-default", thread.encode())
    Ingest(store, ref_protector(store.engine, Config()), Config()).body("test", body, at)


def unknown_answer(thread: str, at: int) -> dict[str, Any]:
    """An answer naming an interrupt its thread never raised: a finding of the auditor's."""
    answer = {"interruptId": "nope", "status": "resolved", "payload": "approve"}
    return {"threadId": thread, "runId": f"r-{at}", "messages": [], "timestamp": at,
            "resume": [answer]}  # fmt: skip


def counted(engine: Engine) -> dict[tuple[str, str], int]:
    """What the rows count, plus what pruned rows counted: the totals' meaning."""
    out: Counter[tuple[str, str]] = Counter()
    with engine.connect() as c:
        for sql in (
            "SELECT 'findings', rule, count(*) FROM finding GROUP BY rule",
            "SELECT 'lines', kind, sum(lines) FROM line_count GROUP BY kind",
            "SELECT 'rejects', reason, count(*) FROM reject GROUP BY reason",
            "SELECT counter, key, value FROM pruned_total "
            "WHERE counter IN ('findings', 'lines', 'rejects')",
        ):
            for counter, key, n in c.execute(text(sql)):
                out[(str(counter), str(key))] += int(n)
    return {k: n for k, n in out.items() if n}


def told(auditor: Auditor) -> dict[tuple[str, str], int]:
    """What the auditor's tick exports and continues from (findings, lines, rejects)."""
    ingested, rejected = auditor.state.ingest_totals()
    out = {("findings", rule): n for rule, n in auditor.state.finding_counts().items()}
    out.update({("lines", kind): n for kind, n in ingested.items()})
    out.update({("rejects", reason): n for reason, n in rejected.items()})
    return {k: n for k, n in out.items() if n}


def findings_of(totals: dict[tuple[str, str], int]) -> dict[str, int]:
    return {key: n for (counter, key), n in totals.items() if counter == "findings"}


def test_the_totals_equal_the_rows_counts_through_ingest_audit_repeats_pruning_and_restart(
    open_stores: Callable[[], Store],
) -> None:
    store = open_stores()
    auditor = Auditor(store, POLICIES)
    crewai(store, "t-crew", T0)
    crewai(store, "t-crew", T0 + MIN)  # delivered again: its findings are stored already
    ingest(store, [unknown_answer("t-mixed", T0 + 2 * MIN)], T0 + 2 * MIN)
    history(store, auditor)  # t-mixed is evaluated again every day: its finding each time
    auditor.tick(NOW)
    truth = counted(store.engine)

    assert truth == told(auditor)
    found = findings_of(truth)
    assert {"interrupt_reported_as_success": 1, "cancel_runs_first_outcome": 1} == {
        k: found[k] for k in ("interrupt_reported_as_success", "cancel_runs_first_outcome")
    }
    assert found.get("answer_unknown_interrupt", 0) >= 1
    assert truth[("lines", "redelivered")] > 0 and truth[("rejects", "not_json")] == 2
    assert findings_of(truth) == auditor.snapshot.findings

    pruned = Retention(store.engine, WEEK).prune(NOW, budget_s=60)
    restarted = Auditor(open_stores(), POLICIES)

    assert pruned.threads >= 1
    with store.engine.connect() as c:  # the crewai thread's findings went, still counted
        left = c.execute(text("SELECT count(*) FROM finding WHERE thread_id = 't-crew'"))
        assert 0 == left.scalar_one()
    assert truth == counted(store.engine) == told(restarted)
    assert found == restarted.snapshot.findings

    crewai(store, "t-crew", NOW)  # the pruned findings noticed again: stored, and counted
    restarted.tick(NOW + MIN)

    assert counted(store.engine) == told(restarted)
    assert (
        found["cancel_runs_first_outcome"] + 1
        == restarted.snapshot.findings["cancel_runs_first_outcome"]
    )
    assert counters(restarted.snapshot) == counters(Auditor(open_stores(), POLICIES).snapshot)


def test_two_writers_of_one_finding_count_it_once(open_stores: Callable[[], Store]) -> None:
    first, second = open_stores(), open_stores()
    finding = FindingFact(
        rule="cancel_runs_first_outcome", at=T0, seq=1, thread_id="t", run_id="r",
        interrupt_id="i",
    )  # fmt: skip
    done = threading.Event()
    errors: list[BaseException] = []

    def race() -> None:
        try:  # waits for the first writer's commit (a row lock, or SQLite's write lock)
            with second.unit("b", T0) as writer:
                assert writer is not None
                writer.write([finding], [], {"custom": 1}, 1, 0)
        except BaseException as e:
            errors.append(e)
        done.set()

    with first.unit("a", T0) as writer:
        assert writer is not None
        writer.write([finding], [], {"custom": 1}, 1, 0)
        racer = threading.Thread(target=race)
        racer.start()
        time.sleep(0.5)
        assert not done.is_set()  # the second writer is blocked behind the first
    racer.join(30)

    assert [] == errors
    truth = counted(first.engine)
    # the second unit's one fact was stored already: its line is counted as redelivered
    lines = {("lines", "custom"): 1, ("lines", "redelivered"): 1}
    assert {("findings", "cancel_runs_first_outcome"): 1, **lines} == truth
    assert truth == told(Auditor(first, POLICIES))


@contextmanager
def statements(engine: Engine) -> Iterator[list[str]]:
    """Every statement `engine` runs meanwhile."""
    seen: list[str] = []

    def record(conn: Any, cursor: Any, sql: str, *args: Any) -> None:
        seen.append(sql)

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


_READS = re.compile(r"\b(?:FROM|JOIN)\s+\"?(finding|line_count|reject)\b", re.IGNORECASE)


def scans(sql: str) -> bool:
    """A read of finding, line_count or reject that is not a lookup by a key: counting the
    table (GROUP BY) or reading it without a WHERE."""
    return bool(_READS.search(sql)) and ("GROUP BY" in sql.upper() or "WHERE" not in sql.upper())


def test_a_tick_reads_the_totals_without_counting_the_finding_line_or_reject_tables(
    open_stores: Callable[[], Store],
) -> None:
    store = open_stores()
    auditor = Auditor(store, POLICIES)
    crewai(store, "t-crew", T0)
    history(store, auditor)
    auditor.tick(NOW)
    assert findings_of(counted(store.engine))

    with statements(store.engine) as idle:
        auditor.tick(NOW + MIN)
    ingest(store, [unknown_answer("t-mixed", NOW + 2 * MIN)], NOW + 2 * MIN)
    with statements(store.engine) as busy:
        report = auditor.tick(NOW + 3 * MIN)

    assert report.threads == 1
    assert idle and busy
    assert [] == [sql for sql in idle + busy if scans(sql)]
    assert findings_of(counted(store.engine)) == auditor.snapshot.findings
    assert counted(store.engine) == told(auditor)


def test_the_scan_rule_catches_the_counts_a_tick_made_before() -> None:
    """The statements the totals replaced, as SQLAlchemy wrote them, are scans."""
    assert scans("SELECT finding.rule, count(*) AS count_1 \nFROM finding GROUP BY finding.rule")
    assert scans("SELECT line_count.kind, sum(line_count.lines) AS sum_1 \nFROM line_count "
                 "GROUP BY line_count.kind")  # fmt: skip
    assert not scans("SELECT rule, at FROM finding WHERE thread_id IN (?, ?)")


def test_a_batch_of_units_adds_its_totals_in_its_transaction(
    open_stores: Callable[[], Store],
) -> None:
    store = open_stores()
    ing = Ingest(store, ref_protector(store.engine, Config()), Config())
    bodies = [
        CREWAI.replace(b"thread-crewai-cancel-default", b"t-a"),
        CREWAI.replace(b"thread-crewai-cancel-default", b"t-b") + b"\n{not json",
        CREWAI.replace(b"thread-crewai-cancel-default", b"t-a"),  # stored by the first
    ]
    units = [
        ing.read("batch", b, T0 + k, encoding="utf-8", key=f"k{k}") for k, b in enumerate(bodies)
    ]

    ing.units(units)
    ing.units(units)  # every key stored already: nothing more

    truth = counted(store.engine)
    assert 2 == findings_of(truth)["cancel_runs_first_outcome"]
    assert 1 == truth[("rejects", "not_json")]
    assert truth == told(Auditor(store, POLICIES))


def test_a_signal_naming_a_recorded_wait_looks_its_record_up_once(
    open_stores: Callable[[], Store],
) -> None:
    """The unit's dirty mark of the wait's thread, with the wait's time (earlier than the
    signal's), from one lookup of wait_state (store.repo UnitWriter._mark_dirty)."""
    store = open_stores()
    history(store, Auditor(store, POLICIES))
    with store.engine.connect() as c:
        rid, requested = c.execute(
            text("SELECT request_id, requested_at FROM wait_state WHERE thread_id = 't-open'")
        ).one()
        c.execute(text("DELETE FROM dirty_thread"))
        c.commit()
    route = {"type": "CUSTOM", "name": "sidewatch.route", "timestamp": NOW,
             "value": {"requestId": rid, "delivered": True}}  # fmt: skip

    with statements(store.engine) as seen:
        ingest(store, [route], NOW)

    assert 1 == len([sql for sql in seen if re.search(r"\bFROM wait_state\b", sql)])
    with store.engine.connect() as c:
        marks = c.execute(text("SELECT thread_id, early FROM dirty_thread")).all()
    assert [("t-open", requested)] == [tuple(m) for m in marks]
