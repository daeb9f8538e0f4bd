"""Migration 0021 on SQLite and PostgreSQL: a store of the 0020 schema, whose settled waits
are stored as finished bodies, upgrades without losing a fact or a verdict; the bodies go
with the checkpoints beside them, and the next evaluation takes both again, each settled
wait kept as its evidence without heartbeats (the threads are marked for it, with no new
fact); the downgrade gives the 0020 schema back, its
checkpoints kept (valid without their bodies)."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, create_engine, inspect, text

from sidewatch.app.audit import Auditor
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store
from tests.app.test_checkpoint_tick import QUIET, RUNS, START, THREAD
from tests.store.test_migration_0013 import _audited, _counts, _to
from tests.store.test_migration_0017 import _count


def _columns(engine: Engine, table: str) -> list[str]:
    return [c["name"] for c in inspect(engine).get_columns(table)]


def test_a_0020_store_upgrades_without_loss_and_keeps_its_settled_waits_again(
    blank_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _audited(blank_db_url, monkeypatch)
    assert RUNS // 10 - 1 == _count(store.engine, "settled_wait")
    store.engine.dispose()
    engine = create_engine(blank_db_url)
    _to(engine, "0020")
    assert ["thread_id", "request_id", "at", "since", "body"] == _columns(engine, "settled_wait")
    assert 1 == _count(engine, "thread_checkpoint")  # kept: valid without its bodies
    with engine.begin() as c:  # a body as 0017 to 0020 stored them
        c.execute(
            text("INSERT INTO settled_wait VALUES (:t, 'r', 1, 1, :b)"),
            {"t": THREAD, "b": b"x\x9c body"},
        )
    kept = _counts(engine)

    store = Store(open_store(blank_db_url))  # upgraded to the head

    assert kept == _counts(store.engine)
    assert ["thread_id", "request_id", "at", "evidence"] == _columns(store.engine, "settled_wait")
    counts = (_count(store.engine, "thread_checkpoint"), _count(store.engine, "settled_wait"))
    assert (0, 0) == counts
    with store.engine.connect() as c:  # marked: the next tick takes the checkpoint again
        assert [THREAD] == c.execute(text("SELECT thread_id FROM dirty_thread")).scalars().all()
    Auditor(store, (QUIET,)).tick(START + 200_000)
    assert 1 == _count(store.engine, "thread_checkpoint")
    assert RUNS // 10 - 1 == _count(store.engine, "settled_wait")
    store.engine.dispose()
    engine.dispose()
