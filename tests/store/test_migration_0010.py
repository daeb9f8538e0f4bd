"""Migration 0010 on SQLite and PostgreSQL: it adds the counts of pruned rows and nothing
else; its downgrade gives the 0009 schema back while nothing was pruned, and refuses once
something was (the counts would be lost, and counters would go back)."""

from __future__ import annotations

import pytest
from alembic import command
from sqlalchemy import Engine, create_engine, inspect, text

from sidewatch.store.db import _alembic_config, open_store


def _to(engine: Engine, revision: str) -> None:
    cfg = _alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)


def test_the_downgrade_of_a_store_that_pruned_nothing_gives_0009_back(blank_db_url: str) -> None:
    open_store(blank_db_url).dispose()
    engine = create_engine(blank_db_url)

    _to(engine, "0009")

    assert "pruned_total" not in inspect(engine).get_table_names()
    with engine.connect() as c:
        assert "0009" == c.execute(text("SELECT version_num FROM alembic_version")).scalar()
    engine.dispose()
    open_store(blank_db_url).dispose()  # and up again


def test_the_downgrade_of_a_store_that_pruned_refuses_and_keeps_the_counts(
    blank_db_url: str,
) -> None:
    open_store(blank_db_url).dispose()
    engine = create_engine(blank_db_url)
    with engine.begin() as c:
        c.execute(text("INSERT INTO pruned_total (counter, key, value) VALUES ('lines', 'run', 7)"))

    with pytest.raises(RuntimeError, match="would lose them"):
        _to(engine, "0009")

    with engine.connect() as c:
        assert 7 == c.execute(text("SELECT value FROM pruned_total")).scalar()
    engine.dispose()
