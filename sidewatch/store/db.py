"""Opening the store: the engine, SQLite's WAL settings, and Alembic migrations to head."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config as AlembicConfig
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.exc import ArgumentError, OperationalError, SQLAlchemyError

from sidewatch.errors import StoreError

_MIGRATIONS = Path(__file__).with_name("migrations")


def open_store(url: str, migrate: bool = True, busy_timeout_ms: int = 10_000) -> Engine:
    """An engine on `url` with the schema at the newest migration (applied when missing).
    SQLite waits up to `busy_timeout_ms` for another writer's lock, then fails (503)."""
    try:
        # pre_ping: a connection the server dropped (restart, failover) is replaced, not used
        engine = create_engine(url, future=True, pool_pre_ping=True)
    except (ArgumentError, ImportError) as e:
        raise StoreError(f"store URL {_safe(url)!r} is not usable: {e}") from e
    if engine.dialect.name == "sqlite":
        _create_private(engine)
        _sqlite_pragmas(engine, busy_timeout_ms)
    if migrate:
        try:
            upgrade(engine)
        except StoreError:
            engine.dispose()  # nobody else holds the engine to close its connections
            raise
    return engine


def sqlite_file(engine: Engine) -> Path | None:
    """The file of an SQLite store; None for any other, and for an in-memory database or a
    URI filename (no path of its own)."""
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:":
        return None
    return None if database.startswith("file:") else Path(database)


def _create_private(engine: Engine) -> None:
    """A new SQLite file is created `0600` (SQLite gives its -wal and -shm files the same
    mode): it holds who was asked to approve what, and when."""
    path = sqlite_file(engine)
    if path is None:
        return
    # Already there (its mode is the operator's), or an error SQLite then says better.
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def _sqlite_pragmas(engine: Engine, busy_timeout_ms: int) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        # FULL: a commit is on disk before ingest answers, even across a power cut.
        cur.execute("PRAGMA synchronous=FULL")
        cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()


def _alembic_config() -> AlembicConfig:
    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(_MIGRATIONS))
    return cfg


def upgrade(engine: Engine) -> None:
    """Bring the schema to the newest migration; a no-op (one query) when it already is."""
    cfg = _alembic_config()
    head = ScriptDirectory.from_config(cfg).get_current_head()
    try:
        with engine.begin() as conn:
            if MigrationContext.configure(conn).get_current_revision() == head:
                return
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
    except OperationalError as e:
        raise StoreError(f"store {_safe(str(engine.url))} is unavailable: {e.orig}") from e
    except SQLAlchemyError as e:
        raise StoreError(f"store {_safe(str(engine.url))}: migration failed: {e}") from e


def revision(engine: Engine) -> tuple[str | None, str | None]:
    """(the store's schema revision, the newest this sidewatch knows)."""
    head = ScriptDirectory.from_config(_alembic_config()).get_current_head()
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision(), head
    except OperationalError as e:
        raise StoreError(f"store {_safe(str(engine.url))} is unavailable: {e.orig}") from e


def _safe(url: str) -> str:
    """The URL without its password, for messages."""
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        return f"{scheme}://{creds.split(':', 1)[0]}:***@{host}"
    return url
