"""Opening the store: the engine, SQLite's WAL settings, and Alembic migrations to head; and
telling a store error safely, as an outage or as a refusal of what was written."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config as AlembicConfig
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import (
    ArgumentError,
    DBAPIError,
    DisconnectionError,
    InterfaceError,
    InternalError,
    OperationalError,
    SQLAlchemyError,
)
from sqlalchemy.exc import TimeoutError as PoolTimeout

from sidewatch.errors import StoreError, StoreRefused

_MIGRATIONS = Path(__file__).with_name("migrations")


def open_store(url: str, migrate: bool = True, busy_timeout_ms: int = 10_000) -> Engine:
    """An engine on `url` with the schema at the newest migration (applied when missing).
    SQLite waits up to `busy_timeout_ms` for another writer's lock, then fails (503)."""
    try:
        # pre_ping: a connection the server dropped (restart, failover) is replaced, not used.
        # hide_parameters: an error's text never holds the values of a unit.
        engine = create_engine(url, future=True, pool_pre_ping=True, hide_parameters=True)
    except (ArgumentError, ImportError) as e:
        raise StoreError(f"store URL {_safe(url)!r} is not usable: {_hint(url, e)}") from e
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
        raise store_error(f"store {_safe(str(engine.url))} is unavailable", e) from None
    except SQLAlchemyError as e:
        raise store_error(f"store {_safe(str(engine.url))}: migration failed", e) from None


def revision(engine: Engine) -> tuple[str | None, str | None]:
    """(the store's schema revision, the newest this sidewatch knows)."""
    head = ScriptDirectory.from_config(_alembic_config()).get_current_head()
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision(), head
    except OperationalError as e:
        raise store_error(f"store {_safe(str(engine.url))} is unavailable", e) from None


def _safe(url: str) -> str:
    """The URL without its password, for messages (SQLAlchemy's own masking)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "(a URL SQLAlchemy cannot parse)" if "@" in url else url


def _hint(url: str, e: BaseException) -> str:
    """Why SQLAlchemy cannot use `url`, with what to do about it."""
    scheme = url.partition("://")[0]
    if scheme in ("postgres", "postgresql") and isinstance(e, ImportError | ArgumentError):
        return (
            f"{e}; for PostgreSQL write postgresql+psycopg://… "
            "(with pip install 'sidewatch[postgres]')"
        )
    if isinstance(e, ImportError) and scheme.startswith("postgresql+psycopg"):
        return f"{e}: pip install 'sidewatch[postgres]'"
    return str(e)


# SQLSTATE classes of a store that cannot work now, whatever is written: connection (08), a
# transaction state such as a read-only standby after a failover (25, 2D), a serialization
# failure or deadlock (40), a full disk or no memory (53), a lock not available (55), a
# shutdown or a statement or lock timeout (57), a system, configuration or internal error (58,
# F0, XX). With a missing grant, table or column (42501, 42P01, 42703) the store is not the
# one this sidewatch migrated: fixed there, not in the units. Every other code (data 22,
# integrity 23, 42, program limits 54 such as an index row too large) is the written data's.
_OUTAGE_CLASSES = frozenset({"08", "25", "2D", "40", "53", "55", "57", "58", "F0", "XX"})
_OUTAGE_CODES = frozenset({"42501", "42P01", "42703"})
# Without a SQLSTATE (SQLite, or an error of the driver itself), the DB-API's class decides.
_OUTAGES = (OperationalError, InterfaceError, InternalError, DisconnectionError, PoolTimeout)


def is_outage(e: SQLAlchemyError) -> bool:
    """Whether `e` says the store is unavailable (retry the same unit later), rather than that
    it refused what was written (the same unit would be refused again)."""
    if isinstance(e, DBAPIError) and e.connection_invalidated:
        return True
    code = getattr(getattr(e, "orig", None), "sqlstate", None)
    if isinstance(code, str) and len(code) == 5:
        return code[:2] in _OUTAGE_CLASSES or code in _OUTAGE_CODES
    return isinstance(e, _OUTAGES)


def failure(e: BaseException) -> str:
    """A store error told safely: its class and code (SQLSTATE, or SQLite's error name) and,
    for an outage, the server's one-line reason (a full disk, a refused connection). Never the
    statement, its parameters or the server's DETAIL line, which may hold a unit's values."""
    orig = getattr(e, "orig", None)
    driver = e if orig is None else orig
    code = getattr(driver, "sqlstate", None) or getattr(driver, "sqlite_errorname", None)
    said = type(e).__name__ + (f" {code}" if code else "")
    if isinstance(e, SQLAlchemyError) and is_outage(e):
        primary = getattr(getattr(driver, "diag", None), "message_primary", None)
        lines = str(primary or driver).splitlines() or [""]
        said += f": {' '.join(lines[0].split())[:200]}"
    return said


def store_error(what: str, e: SQLAlchemyError) -> StoreError:
    """`e` as the StoreError of `what` (raise it `from None`: the chained error's text holds
    the statement)."""
    reason = failure(e)
    return StoreError(f"{what}: {reason}", reason)


def refused(what: str, e: BaseException) -> StoreRefused:
    """`e` as the store's refusal of what was written or asked for (raise it `from None`)."""
    reason = failure(e)
    return StoreRefused(f"{what}: {reason}", reason)


# A read refused: a value asked for that the store cannot hold (a NUL in a requestId, say)
# names nothing stored.
QUERY_REFUSED = "the store refused a value of the query"


@contextmanager
def classified(unavailable: str, refusal: str) -> Iterator[None]:
    """A store error inside becomes a StoreError (`unavailable`: an outage, retry) or a
    StoreRefused (`refusal`: the values written or asked for), told safely. Not chained: the
    error's text holds the statement."""
    try:
        yield
    except SQLAlchemyError as e:
        if is_outage(e):
            raise store_error(unavailable, e) from None
        raise refused(refusal, e) from None
