"""Migration 0015 on SQLite and PostgreSQL: a store at 0014 with heartbeats of a thread that
announced no wait gains the index of spans by age without losing a row, and retention's walk
prunes its old beats by it; the downgrade gives the 0014 schema back, rows and all."""

from __future__ import annotations

from alembic import command
from sqlalchemy import Engine, create_engine, inspect, text

from sidewatch.app.prune import Retention
from sidewatch.store.db import _alembic_config, open_store

DAY = 86_400_000
T0 = 1_785_081_600_000
INDEX = "ix_heartbeat_at"


def _to(engine: Engine, revision: str, down: bool = False) -> None:
    cfg = _alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        (command.downgrade if down else command.upgrade)(cfg, revision)


def _indexes(engine: Engine) -> set[str]:
    return {str(i["name"]) for i in inspect(engine).get_indexes("heartbeat")}


def _rows(engine: Engine) -> list[tuple[object, ...]]:
    with engine.connect() as c:
        return [tuple(r) for r in c.execute(text("SELECT * FROM heartbeat ORDER BY id")).all()]


def test_0015_indexes_heartbeats_by_age_up_and_down_without_loss(blank_db_url: str) -> None:
    engine = create_engine(blank_db_url)
    _to(engine, "0014")
    with engine.begin() as c:
        c.execute(
            text(
                "INSERT INTO heartbeat (thread_id, run_id, handle, at, seq, last_at, last_seq, "
                "beats) VALUES (:t, NULL, true, :at, :seq, :at, :seq, 1)"
            ),
            [{"t": f"ghost-{k % 2}", "at": T0 + k * DAY, "seq": k} for k in range(4)],
        )
    kept = _rows(engine)
    assert INDEX not in _indexes(engine)

    migrated = open_store(blank_db_url)  # upgraded to the head
    assert INDEX in _indexes(migrated)
    assert kept == _rows(migrated)
    # Days 0 to 3; the cutoff at day 2: days 0 and 1 go (a beat of each ghost).
    assert 2 == Retention(migrated, DAY).prune(T0 + 3 * DAY, budget_s=60).unknown
    migrated.dispose()

    _to(engine, "0014", down=True)
    assert INDEX not in _indexes(engine)
    assert kept[2:] == _rows(engine)
    engine.dispose()
