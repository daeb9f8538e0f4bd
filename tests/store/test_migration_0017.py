"""Migration 0017 on SQLite and PostgreSQL: a store of the 0016 schema with a long thread's
checkpoint upgrades without losing a row; its checkpoints are dropped (they have no settled
bodies beside them) and taken again, with the bodies, at the next evaluation; the downgrade
gives the 0016 schema back."""

from __future__ import annotations

import orjson
import pytest
from sqlalchemy import Engine, create_engine, inspect, text

from sidewatch.app.audit import Auditor
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store
from tests.app.test_checkpoint_tick import QUIET, RUNS, START, THREAD
from tests.store.test_migration_0013 import _audited, _counts, _to


def _count(engine: Engine, table: str) -> int:
    with engine.connect() as c:
        return int(c.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())


def test_a_0016_store_upgrades_without_loss_and_takes_its_checkpoints_again_with_bodies(
    blank_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _audited(blank_db_url, monkeypatch)
    assert RUNS // 10 - 1 == _count(store.engine, "settled_wait")
    store.engine.dispose()
    engine = create_engine(blank_db_url)
    _to(engine, "0016")
    assert "settled_wait" not in inspect(engine).get_table_names()
    with engine.connect() as c:
        assert 1 == c.execute(text("SELECT count(*) FROM thread_checkpoint")).scalar_one()
    kept = _counts(engine)

    store = Store(open_store(blank_db_url))  # upgraded to the head

    assert kept == _counts(store.engine)
    counts = (_count(store.engine, "thread_checkpoint"), _count(store.engine, "settled_wait"))
    assert (0, 0) == counts
    new = {"type": "RUN_STARTED", "threadId": THREAD, "runId": "run-new", "timestamp": START}
    Ingest(store, ref_protector(store.engine, Config()), Config()).body(
        "test", orjson.dumps(new), START
    )
    Auditor(store, (QUIET,)).tick(START + 200_000)
    assert 1 == _count(store.engine, "thread_checkpoint")
    assert RUNS // 10 - 1 == _count(store.engine, "settled_wait")
    store.engine.dispose()
    engine.dispose()
