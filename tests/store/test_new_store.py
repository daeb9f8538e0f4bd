"""A new SQLite store is made at once from store/sqlite-schema.sql (store.sqlite_schema): it
must be the store every migration makes, object for object, so that later migrations apply to
it as to any other. PostgreSQL stores are always migrated (see docs/internals/store.md)."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import Engine

from sidewatch.errors import StoreError
from sidewatch.store import db, sqlite_schema
from sidewatch.store.db import head, open_store, upgrade

REGENERATE = "run `python -m sidewatch.store.newstore` to write it again from the migrations"


def schema(engine: Engine) -> dict[str, Any]:
    """Everything SQLite says of a store's schema: every object's statement, and each table's
    columns (type, nullability, default, key), indexes (unique, partial, their columns),
    foreign keys and rows; and the settings a new file takes."""
    with engine.connect() as conn:

        def rows(sql: str) -> list[tuple[Any, ...]]:
            return sorted(tuple(r) for r in conn.exec_driver_sql(sql))

        master = rows("SELECT type, name, tbl_name, sql FROM sqlite_master")
        tables: dict[str, Any] = {}
        for _type, name, *_ in (m for m in master if m[0] == "table"):
            indexes = {
                index[1]: (index[2:], rows(f'PRAGMA index_xinfo("{index[1]}")'))
                for index in rows(f'PRAGMA index_list("{name}")')
            }
            tables[name] = {
                "columns": rows(f'PRAGMA table_xinfo("{name}")'),
                "indexes": indexes,
                "foreign_keys": rows(f'PRAGMA foreign_key_list("{name}")'),
                "rows": rows(f'SELECT * FROM "{name}"'),
            }
        settings = {
            p: rows(f"PRAGMA {p}")
            for p in ("auto_vacuum", "journal_mode", "user_version", "application_id", "encoding")
        }
    return {"master": master, "tables": tables, "settings": settings}


def made_and_migrated(tmp_path: Path) -> tuple[Engine, Engine, list[bool]]:
    made: list[bool] = []
    create = sqlite_schema.create
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(
            sqlite_schema, "create", lambda conn, rev: made.append(create(conn, rev)) or made[-1]
        )
        fast = open_store(f"sqlite:///{tmp_path / 'made.db'}")
    migrated = open_store(f"sqlite:///{tmp_path / 'migrated.db'}", migrate=False)
    upgrade(migrated, replay=True)
    return fast, migrated, made


def test_the_schema_script_is_of_the_newest_migration() -> None:
    revision, statements = sqlite_schema.statements(
        sqlite_schema.SCHEMA.read_text(encoding="utf-8")
    )

    assert (head(), True) == (revision, bool(statements)), (
        f"{sqlite_schema.SCHEMA.name}: {REGENERATE}"
    )


def test_a_new_sqlite_store_is_the_store_every_migration_makes(tmp_path: Path) -> None:
    fast, migrated, made = made_and_migrated(tmp_path)

    made_schema, migrated_schema = schema(fast), schema(migrated)
    fast.dispose()
    migrated.dispose()

    assert [True] == made, "the new store was migrated, not made from the script"
    assert migrated_schema["master"] == made_schema["master"], REGENERATE
    assert migrated_schema == made_schema, REGENERATE


def test_a_store_made_from_the_script_takes_the_migrations_down_and_up(tmp_path: Path) -> None:
    fast, migrated, made = made_and_migrated(tmp_path)
    for engine in (fast, migrated):
        with engine.begin() as conn:
            cfg = db._alembic_config()
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "base")
    down = schema(fast), schema(migrated)
    for engine in (fast, migrated):
        upgrade(engine)
    up = schema(fast), schema(migrated)
    fast.dispose()
    migrated.dispose()

    assert [True] == made, "the new store was migrated, not made from the script"
    assert down[1] == down[0]
    assert up[1] == up[0]


def test_a_new_store_whose_making_fails_is_left_empty_and_made_next_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "broken.sql"
    text = sqlite_schema.SCHEMA.read_text(encoding="utf-8")
    broken.write_text(text + "CREATE TABLE unit (id INTEGER);\n", encoding="utf-8")
    url = f"sqlite:///{tmp_path / 'new.db'}"
    monkeypatch.setattr(sqlite_schema, "SCHEMA", broken)
    with pytest.raises(StoreError, match="table unit already exists"):
        open_store(url)
    engine = open_store(url, migrate=False)
    with engine.connect() as conn:
        left = conn.exec_driver_sql("SELECT count(*) FROM sqlite_master").scalar()
    engine.dispose()
    monkeypatch.undo()

    made = open_store(url)
    with made.connect() as conn:
        version = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
    made.dispose()

    assert (0, head()) == (left, version)


def _open(url: str, barrier: Any, answers: Any) -> None:
    barrier.wait()
    try:
        open_store(url).dispose()
        answers.put("ok")
    except StoreError as e:
        answers.put(str(e))


def test_processes_that_make_the_same_new_store_at_once_take_turns(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new.db'}"
    barrier, answers = multiprocessing.Barrier(3), multiprocessing.Queue()
    openers = [multiprocessing.Process(target=_open, args=(url, barrier, answers)) for _ in "abc"]
    for p in openers:
        p.start()
    for p in openers:
        p.join(60)
    said = sorted(answers.get(timeout=5) for _ in openers)
    engine = open_store(url, migrate=False)
    with engine.connect() as conn:
        version = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
    engine.dispose()

    assert (["ok", "ok", "ok"], head()) == (said, version)


def test_a_new_store_is_migrated_where_the_script_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_schema, "SCHEMA", tmp_path / "missing.sql")
    engine = open_store(f"sqlite:///{tmp_path / 'new.db'}")
    with engine.connect() as conn:
        version = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
    engine.dispose()

    assert head() == version


def test_opening_takes_a_busy_answer_sqlite_gives_without_waiting_as_a_try_to_repeat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replicas opening one new SQLite store at once can meet a lock SQLite does not wait for
    (a read that then writes after another connection wrote): the open tries again; a store
    error of another kind, or a busy answer that came after waiting, is not retried."""
    real, calls = db.upgrade, []

    def busy_twice(engine: Any, replay: bool = False) -> None:
        calls.append(1)
        if len(calls) <= 2:
            raise StoreError("store is unavailable: SQLITE_BUSY", "OperationalError SQLITE_BUSY")
        real(engine)

    monkeypatch.setattr(db, "upgrade", busy_twice)
    engine = db.open_store(f"sqlite:///{tmp_path / 'a.db'}")
    engine.dispose()

    def refused(engine: Any, replay: bool = False) -> None:
        calls.append(1)
        raise StoreError("store is unavailable: disk full", "OperationalError SQLITE_FULL")

    monkeypatch.setattr(db, "upgrade", refused)
    with pytest.raises(StoreError, match="disk full"):
        db.open_store(f"sqlite:///{tmp_path / 'b.db'}")

    def busy_after_waiting(engine: Any, replay: bool = False) -> None:
        calls.append(1)
        clock.append(clock[-1] + 10.0)  # it waited out a busy_timeout of 10 s
        raise StoreError("store is unavailable: SQLITE_BUSY", "OperationalError SQLITE_BUSY")

    clock = [1_000.0]
    monkeypatch.setattr(db.time, "monotonic", lambda: clock[-1])
    monkeypatch.setattr(db, "upgrade", busy_after_waiting)
    with pytest.raises(StoreError, match="SQLITE_BUSY"):
        db.open_store(f"sqlite:///{tmp_path / 'c.db'}")

    assert 5 == len(calls)  # three tries of the first; one of the second and of the third
