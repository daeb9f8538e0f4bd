"""Migration 0016 on SQLite and PostgreSQL: a store of the 0015 schema with a long thread's
checkpoint upgrades without losing a row; its checkpoints are dropped (a fact that came late
before the upgrade is in no dirty mark's time) and taken again at the next evaluation; the
downgrade gives the 0015 schema back."""

from __future__ import annotations

import orjson
import pytest
from sqlalchemy import create_engine, inspect, text

from sidewatch.app.audit import Auditor
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store
from tests.app.test_checkpoint_tick import QUIET, START, THREAD
from tests.store.test_migration_0013 import _audited, _counts, _to


def _checkpoints(store: Store) -> int:
    with store.engine.connect() as c:
        return int(c.execute(text("SELECT count(*) FROM thread_checkpoint")).scalar_one())


def test_a_0015_store_upgrades_without_loss_and_takes_its_checkpoints_again(
    blank_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _audited(blank_db_url, monkeypatch)
    store.engine.dispose()
    engine = create_engine(blank_db_url)
    _to(engine, "0015")
    columns = {c["name"] for c in inspect(engine).get_columns("dirty_thread")}
    assert "early" not in columns
    with engine.connect() as c:
        assert 1 == c.execute(text("SELECT count(*) FROM thread_checkpoint")).scalar_one()
    kept = _counts(engine)

    store = Store(open_store(blank_db_url))  # upgraded to the head

    assert kept == _counts(store.engine)
    assert "early" in {c["name"] for c in inspect(store.engine).get_columns("dirty_thread")}
    names = {i["name"] for i in inspect(store.engine).get_indexes("subagent")}
    assert "ix_subagent_thread_invocation" in names
    assert 0 == _checkpoints(store)
    new = {"type": "RUN_STARTED", "threadId": THREAD, "runId": "run-new", "timestamp": START}
    Ingest(store, ref_protector(store.engine, Config()), Config()).body(
        "test", orjson.dumps(new), START
    )
    with store.engine.connect() as c:  # the new fact's time is in its thread's mark
        assert START == c.execute(text("SELECT early FROM dirty_thread")).scalar_one()
    Auditor(store, (QUIET,)).tick(START + 200_000)
    assert 1 == _checkpoints(store)
    store.engine.dispose()
    engine.dispose()
