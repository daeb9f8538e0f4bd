"""Migration 0011 on SQLite and PostgreSQL: a store written at 0010 keeps every interrupt, each
not pruned (so every wait it announced is a wait as before), and gains the retry queue; the
downgrade gives 0010 back while no interrupt is pruned, and refuses once one is (it would be an
open wait again)."""

from __future__ import annotations

import pytest
from alembic import command
from sqlalchemy import Engine, create_engine, inspect, text

from sidewatch.app.audit import Auditor
from sidewatch.config import Config
from sidewatch.core.engine import evaluate
from sidewatch.store.db import _alembic_config, open_store
from sidewatch.store.repo import Store

T0 = 1_785_081_600_000


def _migrate(engine: Engine, revision: str, down: bool = False) -> None:
    cfg = _alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        (command.downgrade if down else command.upgrade)(cfg, revision)


@pytest.fixture
def at_0010(blank_db_url: str) -> Engine:
    engine = create_engine(blank_db_url)
    _migrate(engine, "0010")
    with engine.begin() as c:
        c.execute(
            text(
                "INSERT INTO interrupt (thread_id, run_id, interrupt_id, at, seq, reason, "
                "tool_result_receipt) VALUES ('t', 'r1', 'i', :at, 7, 'tool_call', false)"
            ),
            {"at": T0 + 1000},
        )
    return engine


def test_every_interrupt_survives_as_an_interrupt_not_pruned(
    at_0010: Engine, blank_db_url: str
) -> None:
    store = Store(open_store(blank_db_url))  # upgrades to the newest revision

    (facts,) = store.threads(["t"])
    (wait,) = evaluate(facts, Auditor(store, Config().policies).policy_for, T0 + 2000).waits

    assert [("t", "r1", "i", 7, False)] == [
        (i.thread_id, i.run_id, i.interrupt_id, i.seq, i.pruned) for i in facts.interrupts
    ]
    assert "t/i" == wait.evidence.request_id
    assert "prune_retry" in inspect(store.engine).get_table_names()
    store.engine.dispose()
    at_0010.dispose()


def test_the_downgrade_refuses_once_an_interrupt_is_pruned(
    at_0010: Engine, blank_db_url: str
) -> None:
    store = Store(open_store(blank_db_url))
    _migrate(at_0010, "0010", down=True)  # nothing pruned: 0010 back
    assert "prune_retry" not in inspect(at_0010).get_table_names()
    _migrate(at_0010, "head")
    with at_0010.begin() as c:
        c.execute(text("UPDATE interrupt SET pruned = true WHERE run_id = 'r1'"))

    with pytest.raises(RuntimeError, match="open waits again"):
        _migrate(at_0010, "0010", down=True)

    with at_0010.connect() as c:
        assert 1 == c.execute(text("SELECT count(*) FROM interrupt WHERE pruned")).scalar()
    store.engine.dispose()
    at_0010.dispose()
