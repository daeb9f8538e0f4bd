"""Migration 0013 on SQLite and PostgreSQL: a store of the 0012 schema, with facts and
verdicts in it, upgrades without losing a row, and gains the checkpoints table (empty: each
long thread gets one at its next evaluation) and the indexes by (thread, time); the
downgrade gives the 0012 schema back."""

from __future__ import annotations

import orjson
import pytest
from alembic import command
from sqlalchemy import Engine, create_engine, inspect, text

from sidewatch.app import evaluate as evaluation
from sidewatch.app.audit import Auditor
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.store.db import _alembic_config, open_store
from sidewatch.store.repo import Store
from sidewatch.store.transitions import count_moves
from tests.app.test_checkpoint_tick import QUIET, RUNS, START, THREAD, _run

TABLES = ("interrupt", "run_fact", "answer", "wait_state", "transition", "unit", "finding")


def _to(engine: Engine, revision: str, up: bool = False) -> None:
    cfg = _alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        (command.upgrade if up else command.downgrade)(cfg, revision)


def _counts(engine: Engine) -> dict[str, int]:
    """Rows of TABLES; of `transition`, the transitions (since 0020 a row a recording holds
    the earlier ones of it in `earlier`)."""
    packed = "earlier" in {c["name"] for c in inspect(engine).get_columns("transition")}
    with engine.connect() as c:
        out = {t: int(c.execute(text(f"SELECT count(*) FROM {t}")).scalar_one()) for t in TABLES}
        if packed:
            out["transition"] = sum(count_moves(c).values())
    return out


def _audited(url: str, monkeypatch: pytest.MonkeyPatch) -> Store:
    """A store at the head holding the long thread, audited once (its checkpoint kept)."""
    monkeypatch.setattr(evaluation, "LONG", 50)
    store = Store(open_store(url))
    body = b"\n".join(orjson.dumps(x) for i in range(1, RUNS + 1) for x in _run(i))
    Ingest(store, ref_protector(store.engine, Config()), Config()).body("test", body, START)
    Auditor(store, (QUIET,)).tick(START + 100_000)
    return store


def test_a_0012_store_with_facts_and_verdicts_upgrades_without_loss(
    blank_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _audited(blank_db_url, monkeypatch)
    store.engine.dispose()
    engine = create_engine(blank_db_url)
    _to(engine, "0012")  # the store as 0012 left it: its facts and verdicts
    assert "thread_checkpoint" not in inspect(engine).get_table_names()
    kept = _counts(engine)
    assert kept["wait_state"] == RUNS // 10 and kept["interrupt"] == RUNS // 10

    store = Store(open_store(blank_db_url))  # upgraded to the head

    assert kept == _counts(store.engine)
    names = {i["name"] for i in inspect(store.engine).get_indexes("run_fact")}
    assert "ix_run_fact_thread_at" in names
    with store.engine.connect() as c:
        assert 0 == c.execute(text("SELECT count(*) FROM thread_checkpoint")).scalar_one()
    new = {"type": "RUN_STARTED", "threadId": THREAD, "runId": "run-new", "timestamp": START}
    Ingest(store, ref_protector(store.engine, Config()), Config()).body(
        "test", orjson.dumps(new), START
    )
    Auditor(store, (QUIET,)).tick(START + 200_000)  # a long thread gets its checkpoint
    with store.engine.connect() as c:
        assert 1 == c.execute(text("SELECT count(*) FROM thread_checkpoint")).scalar_one()
    store.engine.dispose()
    engine.dispose()
