"""The daemon prunes to `store.retention` after each audit tick (on SQLite and PostgreSQL):
what is older goes, open waits stay, and the tick's own report is the tick's."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from sidewatch.config import Config
from sidewatch.daemon.serve import Daemon
from tests.app.test_prune import NOW, WEEK, history, table_rows


@pytest.fixture
def daemon(db_url: str) -> Iterator[Daemon]:
    config = dataclasses.replace(Config(), db_url=db_url, store_retention_ms=WEEK)
    made = Daemon(config)
    yield made
    made.engine.dispose()


def test_a_tick_of_the_daemon_prunes_what_is_older_than_the_retention(daemon: Daemon) -> None:
    history(daemon.store, daemon.auditor)

    report = daemon._audit(NOW)

    assert 0 == report.errors
    # t-mixed's closed wait goes beside its open one (the daemon's auditor gives the policies)
    assert ["t-mixed", "t-open", "t-young"] == table_rows(daemon.engine, "wait_state")
    assert 1 == daemon.auditor.snapshot.closed_total[("CLOSED_BY_DECLINE", "default")]
