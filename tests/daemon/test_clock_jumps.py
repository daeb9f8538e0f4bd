"""A daemon whose clock jumps two hours ahead for a few ticks, then comes back (its tick, push
and prune given that time, on SQLite and PostgreSQL, pushing to a real Alertmanager): nothing
younger than the retention is pruned, and `/metrics`, the read API and Alertmanager agree that
the healthy wait is WAITING once the ticks are at the true time."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from starlette.testclient import TestClient

from sidewatch.config import Config
from sidewatch.daemon.serve import Daemon
from tests.app.test_auditor import asked, heartbeat, ingest
from tests.app.test_prune import answered, table_rows
from tests.daemon.test_e2e import _series
from tests.exporters.test_alertmanager import _active, _alertmanager

SEC, MIN, HOUR = 1000, 60_000, 3_600_000
JUMP = 2 * HOUR
CLOSED = 50
EXPORT = "t-export/i-export"
ORPHANED = 'sidewatch_waits{policy="default",state="ORPHANED"}'
WAITING = 'sidewatch_waits{policy="default",state="WAITING"}'


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[str]:
    yield from _alertmanager(tmp_path, "")


@pytest.fixture
def daemon(db_url: str, alertmanager: str) -> Iterator[Daemon]:
    config = dataclasses.replace(
        Config(),
        db_url=db_url,
        store_retention_ms=HOUR,
        alertmanager_url=alertmanager,
        report_schedule=None,
        allowed_hosts=("testserver",),
    )
    made = Daemon(config)
    yield made
    made.lease.release()
    made.engine.dispose()


def test_a_clock_two_hours_ahead_for_a_few_ticks_leaves_no_lasting_damage(
    daemon: Daemon, alertmanager: str
) -> None:
    now = int(time.time()) * SEC  # Alertmanager's clock: the true time
    t = now - 5 * MIN
    closed = [f"t-{n}" for n in range(CLOSED)]
    ingest(
        daemon.store,
        [
            *(x for c in closed for x in [*asked(c, "deploy", t), *answered(c, t + MIN, "ok")]),
            *asked("t-export", "export_dataset", t),
            heartbeat("t-export", t + 2 * MIN),  # fresh until t + 12 min
        ],
        t + 2 * MIN,
    )
    daemon._audit(t + 3 * MIN)
    for k in range(5):  # ticks, pushes and prunes two hours ahead
        daemon._audit(now + JUMP + k * 2 * SEC)
    ahead = _series(generate_latest(daemon.state.registry).decode())
    paged = EXPORT in _active(alertmanager)

    daemon._audit(now)  # the clock is back
    back = _series(generate_latest(daemon.state.registry).decode())
    read = TestClient(daemon.app).get(f"/v1/waits/{EXPORT}").json()["state"]

    assert (1.0, 0.0, True) == (ahead[ORPHANED], ahead[WAITING], paged)
    assert (0.0, 1.0) == (back[ORPHANED], back[WAITING])
    assert "WAITING" == read
    assert EXPORT not in _active(alertmanager)
    assert daemon.alerts is not None and 0 == daemon.alerts.failures
    assert sorted([*closed, "t-export"]) == table_rows(daemon.engine, "wait_state")
