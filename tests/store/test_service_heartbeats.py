"""Service heartbeats in the store: one row per instance, expanded into the heartbeats of the
threads bound to it (durable: any instance of the service; in-memory: its own instance only),
and a beat marks for re-audit only the bound waits it may revive."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import text

from sidewatch.app.audit import Auditor
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.ingest.digest import RefProtector
from sidewatch.store.auditstate import AuditState
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store
from tests.tap.test_tap import deploy_wait

T0 = 1_785_083_400_000
MIN = 60_000


class _Store:
    def __init__(self, url: str) -> None:
        self.engine = open_store(url)
        self.store = Store(self.engine)
        self.protect: RefProtector = ref_protector(self.engine, Config())
        self.auditor = Auditor(self.store, Config().policies)

    def send(self, at: int, *lines: dict[str, Any]) -> None:
        body = "".join(json.dumps({**line, "timestamp": at}) + "\n" for line in lines)
        summary = Ingest(self.store, self.protect, Config()).body("test", body.encode(), at)
        assert () == summary.rejects

    def state(self, request_id: str) -> str:
        with self.engine.connect() as conn:
            return str(
                conn.execute(
                    text("SELECT state FROM wait_state WHERE request_id = :r"), {"r": request_id}
                ).scalar_one()
            )


@pytest.fixture
def db(db_url: str) -> Iterator[_Store]:
    s = _Store(db_url)
    yield s
    s.engine.dispose()


def _beat(instance: str, durable: bool, **thread: str) -> dict[str, Any]:
    value = {**thread, "service": "billing", "instance": instance, "durable": durable}
    return {"type": "CUSTOM", "name": "sidewatch.heartbeat", "value": value}


def _waits(db: _Store, at: int) -> None:
    """Two waits raised by instance A of `billing`, delivered: `t-mem` in memory, `t-dur`
    durable."""
    for thread, durable in (("t-mem", False), ("t-dur", True)):
        route = {"threadId": thread, "interruptId": "i1", "delivered": True, "approverRef": "r"}
        db.send(
            at,
            *deploy_wait(thread),
            {"type": "CUSTOM", "name": "sidewatch.route", "value": route},
            _beat("A", durable, threadId=thread, runId="r1"),
        )


def test_a_service_beat_counts_for_durable_waits_of_any_instance_and_in_memory_of_its_own(
    db: _Store,
) -> None:
    _waits(db, T0)
    db.send(T0 + 1 * MIN, _beat("A", False))
    db.send(T0 + 2 * MIN, _beat("A", False))  # the same row, its latest beat
    db.send(T0 + 11 * MIN, _beat("B", True))  # another replica, or the restarted process

    beats = {t.thread_id: sorted(h.at for h in t.heartbeats) for t in db.store.threads()}
    with db.engine.connect() as conn:
        rows = conn.execute(text("SELECT count(*) FROM service_heartbeat")).scalar_one()
    db.auditor.tick(T0 + 12 * MIN + 1)  # A's latest beat is just past heartbeatFreshness

    assert 2 == rows
    assert [T0, T0 + 1 * MIN, T0 + 2 * MIN] == beats["t-mem"]
    assert [T0, T0 + 1 * MIN, T0 + 2 * MIN, T0 + 11 * MIN] == beats["t-dur"]
    assert ("ORPHANED", "WAITING") == (db.state("t-mem/i1"), db.state("t-dur/i1"))


def test_a_beat_marks_only_the_bound_waits_it_may_revive(db: _Store) -> None:
    _waits(db, T0)
    db.send(T0 + 1 * MIN, _beat("A", False))
    db.auditor.tick(T0 + 12 * MIN)  # A went silent: both waits are stale
    orphaned = (db.state("t-mem/i1"), db.state("t-dur/i1"))
    state = AuditState(db.engine)
    clean = state.dirty()

    db.send(T0 + 13 * MIN, _beat("B", True))  # the restarted process
    marked = {t for t, _ in state.dirty()}
    db.auditor.tick(T0 + 13 * MIN + 1)
    db.send(T0 + 14 * MIN, _beat("B", True))

    assert (("ORPHANED", "ORPHANED"), []) == (orphaned, clean)
    assert {"t-dur"} == marked  # the in-memory wait died with A: a new instance cannot revive it
    assert ("ORPHANED", "WAITING") == (db.state("t-mem/i1"), db.state("t-dur/i1"))
    assert [] == state.dirty()  # a healthy wait is not marked again at every beat
