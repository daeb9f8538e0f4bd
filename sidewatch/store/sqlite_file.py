"""An SQLite store's file: where it is, created private, never used once deleted or replaced,
and the settings of every connection to it."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.exc import DisconnectionError


def sqlite_file(engine: Engine) -> Path | None:
    """The file of an SQLite store; None for any other, and for an in-memory database or a
    URI filename (no path of its own)."""
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:":
        return None
    return None if database.startswith("file:") else Path(database)


def create_private(engine: Engine) -> None:
    """A new SQLite file is created `0600` (SQLite gives its -wal and -shm files the same
    mode): it holds who was asked to approve what, and when. So is one deleted under the
    running daemon and created again by its next connection."""
    path = sqlite_file(engine)
    if path is None:
        return

    def create() -> None:
        # Already there (its mode is the operator's), or an error SQLite then says better.
        with contextlib.suppress(OSError):
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))

    create()

    @event.listens_for(engine, "do_connect")
    def _private(*_: Any) -> None:  # before SQLite opens (and would create) the file
        create()


def _file_identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def same_file(engine: Engine) -> None:
    """A pooled connection to a file since deleted or replaced (the store recreated empty
    under the daemon) is never used: it would write to a file nobody can open again, and a
    `200` would be a lie. The pool replaces it; the new connection finds the store as it is
    now (no schema: every write a 503, /readyz not ready)."""
    path = sqlite_file(engine)
    if path is None:
        return

    @event.listens_for(engine, "connect")
    def _remember(_dbapi_conn: Any, record: Any) -> None:
        record.info["sidewatch_file"] = _file_identity(path)

    @event.listens_for(engine, "checkout")
    def _same(_dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        if record.info.get("sidewatch_file") != _file_identity(path):
            raise DisconnectionError("the SQLite file was deleted or replaced")


def pragmas(engine: Engine, busy_timeout_ms: int) -> None:
    """Every connection's settings: WAL, FULL synchronous, foreign keys, and how long to wait
    for another writer's lock (first, so that the switch to WAL waits too)."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        # First: the switch to WAL below waits for another connection's lock as long too.
        cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        # Before the first table: a new store gives the pages pruning frees back to the file
        # system (store.retention). A no-op on a store created without it, whose free pages
        # are reused by new rows instead (one offline VACUUM switches it:
        # docs/operating/retention.md).
        cur.execute("PRAGMA auto_vacuum=INCREMENTAL")
        cur.execute("PRAGMA journal_mode=WAL")
        # FULL: a commit is on disk before ingest answers, even across a power cut.
        cur.execute("PRAGMA synchronous=FULL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()
