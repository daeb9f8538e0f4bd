"""Opening the store: the engine, SQLite's WAL settings, and Alembic migrations to head; and
telling a store error safely, as an outage or as a refusal of what was written."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, create_engine, event, make_url
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

from sidewatch.errors import StoreError, StoreRefused, install_hint
from sidewatch.store.sqlite_file import create_private, pragmas, same_file

if TYPE_CHECKING:
    from alembic.config import Config as AlembicConfig
    from alembic.script import ScriptDirectory

# Alembic (and the Mako templates it loads) is imported only to migrate, or to explain a store
# at another revision: a store already at the newest one is told so by one query. PLC0415 is
# waived for this module in pyproject.toml.

_MIGRATIONS = Path(__file__).with_name("migrations")
log = logging.getLogger("sidewatch.store")


@dataclass(frozen=True, slots=True)
class Limits:
    """How long the store may take before its work fails as an outage (503), and how many
    connections a process holds. The timeouts and the pool apply to PostgreSQL."""

    connect_timeout_ms: int = 5_000  # a new connection (libpq's connect_timeout, >= 2 s)
    # One statement on the server (SET LOCAL statement_timeout in each transaction); the
    # client gives up on a statement (or a commit) that has not answered this long after
    # it, plus `STALL_GRACE_S`, by closing its connection: a frozen network or server.
    statement_timeout_ms: int = 15_000
    pool_size: int = 10  # connections kept open
    max_overflow: int = 10  # more, opened under load and closed when returned
    pool_timeout_ms: int = 5_000  # how long a request waits for a free connection
    # psycopg prepares a statement on the server after this many runs; None never does
    # (needed behind PgBouncer in transaction mode, where a client's next transaction may
    # run on another server connection).
    prepare_threshold: int | None = 5

    @classmethod
    def of(cls, config: Any) -> Limits:
        """The limits a sidewatch.config.Config sets."""
        return cls(
            connect_timeout_ms=config.store_connect_timeout_ms,
            statement_timeout_ms=config.store_statement_timeout_ms,
            pool_size=config.store_pool_size,
            pool_timeout_ms=config.store_pool_timeout_ms,
            prepare_threshold=config.store_prepare_threshold,
        )


STALL_GRACE_S = 2.0


def open_store(
    url: str,
    migrate: bool = True,
    busy_timeout_ms: int = 10_000,
    limits: Limits | None = None,
) -> Engine:
    """An engine on `url` with the schema at the newest migration (applied when missing).
    SQLite waits up to `busy_timeout_ms` for another writer's lock, then fails (503).
    `prepare_threshold` in a PostgreSQL URL's query (a number, or `None`) wins over
    `limits.prepare_threshold`."""
    limits = limits or Limits()
    try:
        parsed = make_url(url)
        kwargs: dict[str, Any] = {}
        if parsed.get_backend_name() == "postgresql":
            parsed, kwargs = _pg_args(parsed, limits)
        # pre_ping: a connection the server dropped (restart, failover) is replaced, not used.
        # hide_parameters: an error's text never holds the values of a unit.
        engine = create_engine(
            parsed, future=True, pool_pre_ping=True, hide_parameters=True, **kwargs
        )
    except (ArgumentError, ImportError, ValueError) as e:
        raise StoreError(f"store URL {_safe(url)!r} is not usable: {_hint(url, e)}") from e
    if engine.dialect.name == "sqlite":
        create_private(engine)
        pragmas(engine, busy_timeout_ms)
        same_file(engine)
    elif engine.dialect.name == "postgresql":
        _pg_deadlines(engine, limits)
    if migrate:
        try:
            _upgrade_at_open(engine)
        except StoreError:
            engine.dispose()  # nobody else holds the engine to close its connections
            raise
    return engine


# SQLite answers some contention at once, without waiting out busy_timeout: a transaction
# that read and then writes after another connection wrote (BUSY_SNAPSHOT), or a new file's
# switch to WAL while another connection holds it. Replicas opening the same new store at one
# moment meet it; the next try finds the store made (or makes it), so a few are taken. A busy
# answer that came after waiting (a store another process holds) is not tried again: it has
# had its busy_timeout.
_OPEN_TRIES = 5
_AT_ONCE_S = 0.5


def _upgrade_at_open(engine: Engine) -> None:
    for attempt in range(_OPEN_TRIES):
        started = time.monotonic()
        try:
            upgrade(engine)
            return
        except StoreError as e:
            at_once = time.monotonic() - started < _AT_ONCE_S
            locked = engine.dialect.name == "sqlite" and "SQLITE_BUSY" in (e.reason or "")
            if not (locked and at_once) or attempt == _OPEN_TRIES - 1:
                raise
            time.sleep(0.05 * 2**attempt)


def _pg_args(url: Any, limits: Limits) -> tuple[Any, dict[str, Any]]:
    """The URL without `prepare_threshold` (psycopg wants it as a number or None, and the URL
    gives a string), and the engine's pool and connection arguments."""
    query = dict(url.query)
    threshold = limits.prepare_threshold
    if "prepare_threshold" in query:
        raw = query.pop("prepare_threshold")
        raw = raw[-1] if isinstance(raw, tuple) else raw
        if raw.strip().lower() in ("none", "null", ""):
            threshold = None
        else:
            try:
                threshold = int(raw)
            except ValueError:
                raise ValueError(
                    f"prepare_threshold={raw!r}: must be a number of runs, or None to never "
                    "prepare statements on the server"
                ) from None
    connect: dict[str, Any] = {"prepare_threshold": threshold}
    if "connect_timeout" not in query:
        connect["connect_timeout"] = max(2, round(limits.connect_timeout_ms / 1000))
    return url.set(query=query), {
        "connect_args": connect,
        "pool_size": limits.pool_size,
        "max_overflow": limits.max_overflow,
        "pool_timeout": limits.pool_timeout_ms / 1000,
    }


_UNBOUNDED = threading.local()  # this thread's store work has no client-side deadline


@contextmanager
def unbounded() -> Iterator[None]:
    """Store work in this thread without the client-side deadline: a migration, whose DDL
    may rightly take minutes (or wait for another process's)."""
    _UNBOUNDED.on = True
    try:
        yield
    finally:
        _UNBOUNDED.on = False


class _Stalls:
    """The client's side of the statement timeout: a statement, commit or ping whose answer
    has not come by its deadline (a frozen network or server, where the server's own timeout
    never answers either) gets its connection's socket shut down, so that the waiting thread
    fails at once with a connection error (an outage: 503) and the connection is replaced."""

    def __init__(self) -> None:
        self._armed: dict[int, tuple[float, Any]] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def arm(self, dbapi_conn: Any, seconds: float) -> None:
        if getattr(_UNBOUNDED, "on", False):
            return
        with self._lock:
            self._armed[id(dbapi_conn)] = (time.monotonic() + seconds, dbapi_conn)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._watch, name="sidewatch-store-stalls", daemon=True
                )
                self._thread.start()

    def disarm(self, dbapi_conn: Any) -> None:
        with self._lock:
            self._armed.pop(id(dbapi_conn), None)

    def _watch(self) -> None:
        while True:
            time.sleep(0.25)
            now = time.monotonic()
            with self._lock:
                late = [c for at, c in self._armed.values() if at <= now]
                for c in late:
                    self._armed.pop(id(c), None)
            for c in late:
                log.warning("the store did not answer in time: closing its connection")
                _shut(c)


def _shut(dbapi_conn: Any) -> None:
    """Shut the socket of a psycopg connection down under the thread blocked on it."""
    with contextlib.suppress(Exception):
        fd = dbapi_conn.pgconn.socket
        sock = socket.socket(fileno=os.dup(fd))
        try:
            sock.shutdown(socket.SHUT_RDWR)
        finally:
            sock.close()


def _pg_deadlines(engine: Engine, limits: Limits) -> None:
    """statement_timeout in every transaction (SET LOCAL: right behind PgBouncer in
    transaction mode too, where a session's SET would stay on one server connection), and
    the client's deadline on each statement, commit and ping."""
    stalls = _Stalls()
    statement_ms = int(limits.statement_timeout_ms)
    statement_s = statement_ms / 1000 + STALL_GRACE_S
    ping_s = max(2, round(limits.connect_timeout_ms / 1000)) + STALL_GRACE_S

    @event.listens_for(engine, "begin")
    def _begin(conn: Any) -> None:
        dbapi = conn.connection.dbapi_connection
        stalls.arm(dbapi, statement_s)
        dbapi.execute(f"SET LOCAL statement_timeout = {statement_ms}")
        stalls.disarm(dbapi)

    @event.listens_for(engine, "before_cursor_execute")
    def _before(conn: Any, *_: Any) -> None:
        stalls.arm(conn.connection.dbapi_connection, statement_s)

    @event.listens_for(engine, "after_cursor_execute")
    def _after(conn: Any, *_: Any) -> None:
        stalls.disarm(conn.connection.dbapi_connection)

    @event.listens_for(engine, "handle_error")
    def _failed(ctx: Any) -> None:
        conn = ctx.connection
        if conn is not None and not conn.invalidated:
            stalls.disarm(conn.connection.dbapi_connection)

    @event.listens_for(engine.pool, "checkin")
    def _checkin(dbapi: Any, _record: Any) -> None:
        if dbapi is not None:
            stalls.disarm(dbapi)

    @event.listens_for(engine.pool, "checkout")
    def _checkout(dbapi: Any, *_: Any) -> None:
        stalls.disarm(dbapi)

    # A ping (pool_pre_ping), a commit and a rollback are the driver's own calls, no
    # statements of SQLAlchemy's: their deadline wraps the dialect's methods.
    dialect: Any = engine.dialect
    for name, seconds in (
        ("do_ping", ping_s),
        ("do_commit", statement_s),
        ("do_rollback", statement_s),
    ):
        setattr(dialect, name, _deadline(getattr(dialect, name), stalls, seconds))


def _deadline(call: Any, stalls: _Stalls, seconds: float) -> Any:
    def bounded(dbapi: Any) -> Any:
        stalls.arm(dbapi, seconds)
        try:
            return call(dbapi)
        finally:
            stalls.disarm(dbapi)

    return bounded


def _alembic_config() -> AlembicConfig:
    from alembic.config import Config as AlembicConfig

    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(_MIGRATIONS))
    return cfg


def _script() -> ScriptDirectory:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_alembic_config())


# A migration file's own lines naming it and the one it follows (the form of every file in
# migrations/versions; a file in another form makes `head()` ask Alembic).
_REVISION = re.compile(r"""^revision(?:: *[\w\[\], |]+)? *= *["']([^"']+)["'] *$""", re.M)
_DOWN = re.compile(r"""^down_revision(?:: *[\w\[\], |]+)? *= *(?:["']([^"']+)["']|None) *$""", re.M)


@functools.cache
def head() -> str | None:
    """The newest migration this sidewatch knows: the revision no other one follows, read from
    the migration files' `revision` and `down_revision` lines (loading Alembic's script
    directory to learn it costs most of a read-only command's start). Where the files are not
    one plain chain (a merge, a branch, a form these lines do not match), Alembic's answer."""
    revisions: set[str] = set()
    followed: set[str] = set()
    for path in (_MIGRATIONS / "versions").glob("*.py"):
        source = path.read_text(encoding="utf-8")
        rev, down = _REVISION.findall(source), _DOWN.findall(source)
        if len(rev) != 1 or len(down) != 1:
            return _script().get_current_head()
        revisions.add(rev[0])
        if down[0]:
            followed.add(down[0])
    heads = revisions - followed
    if len(heads) != 1 or not followed <= revisions:
        return _script().get_current_head()
    return heads.pop()


def _current(conn: Connection) -> str | None:
    """The store's schema revision (None: never migrated), in one query when it holds one;
    Alembic's own reading where the version table is not one plain row."""
    if not conn.dialect.has_table(conn, "alembic_version"):
        return None
    rows = conn.exec_driver_sql("SELECT version_num FROM alembic_version").all()
    if len(rows) == 1 and isinstance(rows[0][0], str):
        return rows[0][0]
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(conn).get_current_revision()


# One key per schema: two processes upgrading the same store take turns (the second finds
# the schema at head). Transaction-scoped, so right behind PgBouncer in transaction mode.
_MIGRATION_LOCK = "SELECT pg_advisory_xact_lock(hashtext(current_schema() || '/sidewatch/migrate'))"


def upgrade(engine: Engine, replay: bool = False) -> None:
    """Bring the schema to the newest migration; a no-op (one query) when it already is.
    Refuses a store at a revision this sidewatch does not know (a newer release's, or a
    pre-release build's: `PRE_RELEASE`). A new SQLite store is made at once from the schema
    the migrations leave (store.sqlite_schema); `replay` migrates it (what that is checked)."""
    newest = head()
    try:
        with engine.begin() as conn:
            current = _current(conn)
            if current == newest:
                return
            if current is None and newest is not None and not replay and _new_sqlite(conn):
                from sidewatch.store.sqlite_schema import create

                if create(conn, newest):
                    return
                current = _current(conn)  # made by another process meanwhile, or not new
                if current == newest:
                    return
            from alembic import command

            with unbounded():  # DDL takes its time
                if engine.dialect.name == "postgresql":
                    conn.exec_driver_sql("SET LOCAL statement_timeout = 0")
                    conn.exec_driver_sql(_MIGRATION_LOCK)
                    current = _current(conn)
                    if current == newest:  # another process upgraded it while this one waited
                        return
                _known(engine, current, newest)
                cfg = _alembic_config()
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
    except OperationalError as e:
        raise store_error(f"store {_safe(str(engine.url))} is unavailable", e) from None
    except SQLAlchemyError as e:
        raise store_error(f"store {_safe(str(engine.url))}: migration failed", e) from None


def _new_sqlite(conn: Connection) -> bool:
    """An SQLite database with no table yet, outside a transaction (the new store's own)."""
    driver: Any = conn.connection.driver_connection
    if conn.dialect.name != "sqlite" or driver is None or driver.in_transaction:
        return False
    return not conn.exec_driver_sql("SELECT count(*) FROM sqlite_master").scalar()


# The revisions of the builds before 0.1.0 (squashed into 0001_baseline), whose stores are not
# upgraded; a later revision id is its file's name ("0002_<name>"), never one of these.
PRE_RELEASE = frozenset(f"{n:04d}" for n in range(1, 25))


def _known(engine: Engine, current: str | None, newest: str | None) -> None:
    if current in PRE_RELEASE:
        raise StoreError(
            f"store {_safe(str(engine.url))} has schema revision {current} of a pre-release "
            f"build, which sidewatch no longer upgrades (it starts from {newest}): make a new "
            "store (a new SQLite file, an empty PostgreSQL schema), see docs/operating/upgrades.md"
        )
    if current is not None and current not in {r.revision for r in _script().walk_revisions()}:
        from sidewatch import __version__

        raise StoreError(
            f"store {_safe(str(engine.url))} has schema revision {current}, which this "
            f"sidewatch {__version__} does not know (it knows up to {newest}): a newer release "
            "migrated it; run that release"
        )


def require_head(engine: Engine) -> None:
    """Refuses a store whose schema is not at the newest migration, without changing it: for
    read-only commands, and for `serve --no-migrate`."""
    current, newest = revision(engine)
    if current == newest:
        return
    _known(engine, current, newest)
    raise StoreError(
        f"store {_safe(str(engine.url))} has schema revision {current or '(none)'}, behind "
        f"this sidewatch's {newest}: run `sidewatch db upgrade` first (this command never "
        "changes the schema)"
    )


def revision(engine: Engine) -> tuple[str | None, str | None]:
    """(the store's schema revision, the newest this sidewatch knows)."""
    newest = head()
    try:
        with engine.connect() as conn:
            return _current(conn), newest
    except OperationalError as e:
        raise store_error(f"store {_safe(str(engine.url))} is unavailable", e) from None


# The write /readyz makes when nothing else wrote lately (daemon.writes): one meta row,
# written over, so it never grows.
_PROBE = (
    "INSERT INTO meta (key, value) VALUES ('ready.probe', ?) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)


def probe_write(engine: Engine, now_ms: int) -> None:
    """Commit one small write, as every writer would: raises StoreError (its reason names
    why: a full disk, a read-only store, a lost connection) when the store refuses it."""
    with classified("store refuses writes", "store refuses writes"), engine.begin() as conn:
        qmark = conn.dialect.paramstyle == "qmark"
        conn.exec_driver_sql(_PROBE if qmark else _PROBE.replace("?", "%s"), (str(now_ms),))


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
        return f"{e}; for PostgreSQL write postgresql+psycopg://… (with {install_hint('postgres')})"
    if isinstance(e, ImportError) and scheme.startswith("postgresql+psycopg"):
        return f"{e}: {install_hint('postgres')}"
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
