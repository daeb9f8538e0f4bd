"""Faults of a real store for the tests: a constraint that refuses one thread's rows (a
refusal: the data's fault), and another writer holding the store (an outage)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager

import psycopg
from sqlalchemy import make_url

from sidewatch.store.db import open_store


def _dsn(db_url: str) -> str:
    url = make_url(db_url)
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


@contextmanager
def refusing_thread(db_url: str, thread: str, table: str = "run_fact") -> Iterator[None]:
    """The store, migrated, refuses every row of `thread` in `table` by a constraint of its own
    (SQLite: a trigger that aborts; PostgreSQL: a CHECK), dropped afterwards: a PostgreSQL
    schema is lent to the next test."""
    open_store(db_url).dispose()
    url = make_url(db_url)
    name = f"refuse_{table}_{thread.replace('-', '_')}"
    if url.get_backend_name() == "sqlite":
        with closing(sqlite3.connect(str(url.database), isolation_level=None)) as lite:
            lite.execute(
                f"CREATE TRIGGER {name} BEFORE INSERT ON {table} WHEN NEW.thread_id = "
                f"'{thread}' BEGIN SELECT RAISE(ABORT, 'refused'); END"
            )
            yield
            lite.execute(f"DROP TRIGGER {name}")
        return
    with psycopg.connect(_dsn(db_url), autocommit=True) as pg:
        pg.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} CHECK (thread_id <> '{thread}')")
        try:
            yield
        finally:
            pg.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}")


def impatient(db_url: str) -> str:
    """`db_url` for a store that gives up on another writer's lock within 300 ms (PostgreSQL:
    `lock_timeout`; SQLite: open it with `busy_timeout_ms`)."""
    if make_url(db_url).get_backend_name() == "sqlite":
        return db_url
    return db_url.replace("options=-c", "options=-clock_timeout%3D300%20-c", 1)


@contextmanager
def writes_blocked(db_url: str, table: str) -> Iterator[None]:
    """Another client holds the store's write lock (SQLite) or a lock on `table` that lets
    readers in but no writer (PostgreSQL), until the block ends: an outage of writes."""
    url = make_url(db_url)
    if url.get_backend_name() == "sqlite":
        with closing(sqlite3.connect(str(url.database), isolation_level=None)) as lite:
            lite.execute("BEGIN IMMEDIATE")
            yield
            lite.execute("ROLLBACK")
        return
    with psycopg.connect(_dsn(db_url)) as pg:
        pg.execute(f"LOCK TABLE {table} IN EXCLUSIVE MODE")
        yield
        pg.rollback()
