"""A wait settled before a long thread's checkpoint's cut is served from what was kept of it
(settled_wait, written with the checkpoint: its evidence without heartbeats), given the beats
that reach it when read: the GET of it and the list give what a whole evaluation gives,
without reading the thread's history, whatever beats came since (thread-wide, its run's,
a service bound later); a fact that changes it (a late one, or a later step of the run that
answered it: RESUMED → STUCK) is never served stale."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, text

from sidewatch.app import evaluate as evaluation
from sidewatch.app.audit import Auditor
from sidewatch.app.read import Read
from sidewatch.core.policy import Policy
from sidewatch.store import repo
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store
from tests.app.test_checkpoint_tick import (
    BEATING,
    QUIET,
    RUNS,
    START,
    THREAD,
    _ingest,
    _run,
    _service,
    _thread_beat,
)

NOW = START + 100_000
SETTLED = [f"{THREAD}/approve-{i}" for i in range(10, RUNS, 10)]  # before the cut
EVERY = {"WAITING", "RESUMED", "CLOSED_BY_DECLINE", "CANCELLED", "STUCK_AFTER_DECISION"}


def _loads(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The threads read whole (every fact of them), whichever way."""
    calls: list[list[str]] = []
    for module in (evaluation, repo):
        real = module.load_threads

        def spy(conn: Any, ids: Any, real: Any = real) -> Any:
            calls.append(list(ids))
            return real(conn, ids)

        monkeypatch.setattr(module, "load_threads", spy)
    return calls


def _store(db_url: str, monkeypatch: pytest.MonkeyPatch, runs: int = RUNS) -> Store:
    monkeypatch.setattr(evaluation, "LONG", 50)  # facts: this thread is a long one
    store = Store(open_store(db_url))
    _ingest(store, [line for i in range(1, runs + 1) for line in _run(i)], START)
    return store


@pytest.fixture
def settled(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Store, Auditor]]:
    """The long thread after a tick that cut it at the run of its last wait."""
    store = _store(db_url, monkeypatch)
    auditor = Auditor(store, (QUIET,))
    auditor.tick(NOW)
    with store.engine.connect() as c:
        (cut,) = c.execute(text("SELECT cut FROM thread_checkpoint")).one()
        kept = c.execute(text("SELECT request_id FROM settled_wait")).scalars().all()
    assert cut == START + RUNS * 1000
    assert sorted(SETTLED) == sorted(kept)
    yield store, auditor
    store.engine.dispose()


def _get(store: Store, policy_for: Any, rid: str, now: int) -> dict[str, Any]:
    body = Read(store, policy_for).wait(rid, now)
    assert body is not None
    return body


def _whole_gets(store: Store, policy_for: Any, rids: list[str], now: int) -> dict[str, Any]:
    """The same GETs with no checkpoint: every thread evaluated whole (ends the checkpoint)."""
    with store.engine.begin() as c:
        c.execute(text("DELETE FROM thread_checkpoint"))
    return {rid: _get(store, policy_for, rid, now) for rid in rids}


def test_the_get_of_a_settled_wait_is_read_from_what_was_kept_identical_to_the_whole_thread_s(
    settled: tuple[Store, Auditor], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, auditor = settled
    later = NOW + 86_400_000  # a day on: nothing of a settled wait moves with time alone
    loads = _loads(monkeypatch)

    served = {rid: _get(store, auditor.policy_for, rid, later) for rid in SETTLED}

    assert [] == loads  # not one of the thread's facts before the cut read
    whole = _whole_gets(store, auditor.policy_for, SETTLED, later)
    assert [[THREAD]] * len(SETTLED) == loads
    assert whole == served
    assert list(whole[SETTLED[0]]) == list(served[SETTLED[0]])  # the same fields, in order
    assert {"RESUMED"} == {b["state"] for b in served.values()}
    assert all(b["transitions"] and b["timeline"] for b in served.values())


def test_the_list_serves_settled_waits_that_rank_from_what_was_kept_of_them(
    settled: tuple[Store, Auditor], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, auditor = settled
    later = NOW + 1000
    # A new event: the thread is changed, so its settled waits rank beside the chosen ones.
    new = {"type": "RUN_STARTED", "threadId": THREAD, "runId": "run-new", "timestamp": NOW}
    _ingest(store, [new], NOW)
    loads = _loads(monkeypatch)
    limits = (1, 2, 3, 100)

    served = [Read(store, auditor.policy_for).waits(EVERY, n, later)["waits"] for n in limits]

    assert [] == loads
    with store.engine.begin() as c:
        c.execute(text("DELETE FROM thread_checkpoint"))
    whole = [Read(store, auditor.policy_for).waits(EVERY, n, later)["waits"] for n in limits]
    assert whole == served
    assert [*SETTLED, f"{THREAD}/approve-{RUNS}"] == [w["requestId"] for w in served[-1]]


def test_a_settled_wait_s_get_does_not_read_more_as_the_thread_ages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQLite's VM steps of every statement of the GET of the first wait, at two ages.
    steps: list[int] = []
    for age, runs in (("young", RUNS), ("old", 10 * RUNS)):
        store = _store(f"sqlite:///{tmp_path / age}.db", monkeypatch, runs)
        auditor = Auditor(store, (QUIET,))
        auditor.tick(START + runs * 2000)
        count = [0]

        def step(count: list[int] = count) -> int:
            count[0] += 1
            return 0

        event.listen(
            store.engine,
            "checkout",
            lambda dbapi, *_, step=step: dbapi.set_progress_handler(step, 1),
        )
        store.engine.dispose()  # connections checked out from now on count
        body = _get(store, auditor.policy_for, f"{THREAD}/approve-10", START + runs * 2000)
        assert "RESUMED" == body["state"]
        steps.append(count[0])
        store.engine.dispose()

    young, old = steps
    assert 0 < old <= young * 1.2 + 200, (young, old)


@pytest.mark.parametrize(
    "late",
    [
        pytest.param(START + 31 * 1000 + 5, id="timed-before-the-cut"),
        pytest.param(NOW + 500, id="timed-after-the-cut"),
    ],
)
def test_a_late_failure_of_the_run_that_resumed_a_settled_wait_is_never_served_stale(
    settled: tuple[Store, Auditor], late: int
) -> None:
    store, auditor = settled
    rid = f"{THREAD}/approve-30"
    assert "RESUMED" == _get(store, auditor.policy_for, rid, NOW + 1000)["state"]

    # run-31 (it approved approve-30) failed after all: approve-30 is stuck, not resumed.
    error = {"type": "RUN_ERROR", "threadId": THREAD, "runId": "run-31", "timestamp": late}
    _ingest(store, [{**error, "message": "boom"}], NOW + 1000)
    at = NOW + 600_000
    before_tick = _get(store, auditor.policy_for, rid, at)
    listed = Read(store, auditor.policy_for).waits(EVERY, 100, at)["waits"]
    auditor.tick(at)  # evaluated whole: the kept waits are written again or dropped
    after_tick = {r: _get(store, auditor.policy_for, r, at) for r in SETTLED}

    assert "STUCK_AFTER_DECISION" == before_tick["state"] == after_tick[rid]["state"]
    with store.engine.connect() as c:  # no cut holds before a stuck wait: none is kept
        assert 0 == c.execute(text("SELECT count(*) FROM settled_wait")).scalar_one()
    whole = _whole_gets(store, auditor.policy_for, SETTLED, at)
    # (The transitions are those recorded: the tick recorded RESUMED → STUCK since.)
    assert {**whole[rid], "transitions": None} == {**before_tick, "transitions": None}
    assert whole == after_tick
    assert Read(store, auditor.policy_for).waits(EVERY, 100, at)["waits"] == listed


def test_a_resumed_tick_that_moves_the_cut_stores_the_waits_it_settles(
    settled: tuple[Store, Auditor], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, auditor = settled
    more = [line for i in range(RUNS + 1, RUNS + 21) for line in _run(i)]
    _ingest(store, more, NOW)
    at = NOW + 600_000
    auditor.tick(at)  # from the checkpoint, which moves on past approve-60 and approve-70
    with store.engine.connect() as c:
        (cut,) = c.execute(text("SELECT cut FROM thread_checkpoint")).one()
    assert cut == START + (RUNS + 20) * 1000
    loads = _loads(monkeypatch)
    rids = [*SETTLED, f"{THREAD}/approve-{RUNS}", f"{THREAD}/approve-{RUNS + 10}"]

    served = {rid: _get(store, auditor.policy_for, rid, at + 1000) for rid in rids}

    assert [] == loads
    assert served == _whole_gets(store, auditor.policy_for, rids, at + 1000)


def test_a_thread_wide_beat_after_the_wait_was_kept_is_in_the_settled_wait_s_get(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The engine feeds a thread-wide beat to every wait, a settled one too (its timeline
    # and its lastHeartbeatAt): the GET gives it the beats that reach it when read.
    store = _store(db_url, monkeypatch)
    policy: Policy = BEATING
    auditor = Auditor(store, (policy,))
    auditor.tick(NOW)
    rid = SETTLED[0]
    before = _get(store, auditor.policy_for, rid, NOW + 1000)

    _ingest(store, [_thread_beat(NOW + 500)], NOW + 500)
    loads = _loads(monkeypatch)
    served = _get(store, auditor.policy_for, rid, NOW + 1000)

    assert [] == loads  # not evaluated whole
    assert sum(i["kind"] == "heartbeat" for i in served["timeline"]) == 1
    assert before != served
    assert _whole_gets(store, auditor.policy_for, [rid], NOW + 1000)[rid] == served
    store.engine.dispose()


def test_a_binding_to_a_settled_wait_s_run_after_it_was_kept_is_in_its_get(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A service bound later to the run of a settled wait gives it that service's beats (its
    # timeline, handle and `missing`); a binding is not in the prefix's count, so the read
    # looks the bindings of the wait's own runs up.
    store = _store(db_url, monkeypatch)
    auditor = Auditor(store, (BEATING,))
    auditor.tick(NOW)
    rid = SETTLED[0]  # approve-10, of run-10
    before = _get(store, auditor.policy_for, rid, NOW + 1000)

    _ingest(store, [_service(NOW + 500, threadId=THREAD, runId="run-10")], NOW + 500)
    loads = _loads(monkeypatch)
    served = _get(store, auditor.policy_for, rid, NOW + 1000)

    assert [] == loads
    assert any(i["kind"] == "heartbeat" for i in served["timeline"])
    assert before != served
    assert _whole_gets(store, auditor.policy_for, [rid], NOW + 1000)[rid] == served
    store.engine.dispose()


def _run_beat(at: int, run: str) -> dict[str, Any]:
    """A heartbeat of one run of the thread (for that run's waits), holding a handle."""
    value = {"threadId": THREAD, "runId": run, "resumeHandle": "h"}
    return {"type": "CUSTOM", "name": "sidewatch.heartbeat", "value": value, "timestamp": at}


def test_a_settled_wait_with_its_run_s_beats_is_kept_and_its_span_growing_in_place_is_read(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # run-10 beats while approve-10 waits, and goes on beating after the cut: the beats
    # extend the run's span in place (a row timed before the cut, no new fact of the
    # prefix), which a stored body would have missed.
    monkeypatch.setattr(evaluation, "LONG", 50)
    store = Store(open_store(db_url), heartbeat_gap_ms=60_000)  # the daemon's default gap
    lines = [line for i in range(1, RUNS + 1) for line in _run(i)]
    lines += [_run_beat(START + 10_000 + k * 1000, "run-10") for k in range(3)]
    _ingest(store, lines, START)
    auditor = Auditor(store, (BEATING,))
    auditor.tick(NOW)
    rid = SETTLED[0]
    with store.engine.connect() as c:
        kept = c.execute(text("SELECT request_id FROM settled_wait")).scalars().all()
    assert rid in kept  # its timeline holds heartbeats, and it is kept all the same
    before = _get(store, auditor.policy_for, rid, NOW + 1000)

    _ingest(store, [_run_beat(START + 13_000 + k * 1000, "run-10") for k in range(3)], NOW)
    loads = _loads(monkeypatch)
    served = _get(store, auditor.policy_for, rid, NOW + 1000)

    assert [] == loads
    (span,) = [i for i in served["timeline"] if i["kind"] == "heartbeat"]
    assert 6 == span["beats"]
    assert before != served
    assert _whole_gets(store, auditor.policy_for, [rid], NOW + 1000)[rid] == served
    store.engine.dispose()


def test_new_policies_and_a_dropped_checkpoint_drop_the_kept_waits(
    settled: tuple[Store, Auditor],
) -> None:
    store, _ = settled
    Auditor(store, (replace(QUIET, require_acknowledgement=True),))

    with store.engine.connect() as c:
        assert 0 == c.execute(text("SELECT count(*) FROM settled_wait")).scalar_one()


def test_two_settled_waits_sharing_a_producer_s_request_id_store_the_first(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(evaluation, "LONG", 50)
    store = Store(open_store(db_url))
    lines = [line for i in range(1, RUNS + 1) for line in _run(i)]
    for line in lines:  # approve-20 and approve-30 carry one requestId
        for it in line.get("outcome", {}).get("interrupts", ()):
            if it["id"] in ("approve-20", "approve-30"):
                it["metadata"] = {"requestId": "dup"}
    _ingest(store, lines, START)
    auditor = Auditor(store, (QUIET,))

    report = auditor.tick(NOW)

    assert 0 == report.errors
    with store.engine.connect() as c:
        assert 1 == c.execute(text("SELECT count(*) FROM thread_checkpoint")).scalar_one()
        kept = c.execute(text("SELECT request_id FROM settled_wait")).scalars().all()
    assert 1 == kept.count("dup")
    served = _get(store, auditor.policy_for, "dup", NOW + 1000)
    assert "approve-20" == served["interruptId"]
    assert _whole_gets(store, auditor.policy_for, ["dup"], NOW + 1000)["dup"] == served
    store.engine.dispose()
