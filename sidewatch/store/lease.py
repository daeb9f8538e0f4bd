"""The audit lease: however many replicas share a store, exactly one audits.

Every replica ingests and serves reads; the one holding the lease also runs the audit ticks,
pushes alerts, writes the nightly reports and exports the store-wide metrics. Each replica
calls `claim()` every half interval; one short transaction either renews its own lease, takes
over one that expired, or leaves it to the holder:

- On PostgreSQL, `pg_try_advisory_xact_lock` on a key of the store's schema comes first, so
  contenders never queue behind one another. It is transaction-scoped: safe behind a
  transaction-pooling PgBouncer, where a session lock would stay with whichever client got that
  server connection next.
- The lease row is then updated under its row lock (SQLite: under the one write lock).
- Times are the database's clock, so replicas whose host clocks differ agree on expiry.

`epoch` grows at every change of holder and fences a holder that stalled past expiry: every
save of verdicts first renews the row *where it still names this holder and epoch*
(`fence`), inside the save's transaction. A replica that took over waits for a running save to
commit, and the stalled holder's next save finds the row changed and raises `LeaseLost`, so no
transition is ever recorded twice.
"""

from __future__ import annotations

import os
import secrets
import socket
import time

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from sidewatch.errors import LeaseLost
from sidewatch.store.db import store_error
from sidewatch.store.sql import driver_sql

NAME = "audit"
_NOW = {
    "postgresql": "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint",
    "sqlite": "SELECT CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)",
}
# One key per schema: sidewatch stores in two schemas of one database do not contend.
_TRY_LOCK = "SELECT pg_try_advisory_xact_lock(hashtext(current_schema() || '/sidewatch/lease'))"
_RENEW = "UPDATE lease SET expires_at = ? WHERE name = ? AND holder = ? AND epoch = ?"
_READ = "SELECT epoch, expires_at FROM lease WHERE name = ?"
_TAKE = (
    "UPDATE lease SET holder = ?, epoch = ?, acquired_at = ?, expires_at = ? "
    "WHERE name = ? AND epoch = ?"
)
_CREATE = (
    "INSERT INTO lease (name, holder, epoch, acquired_at, expires_at) VALUES (?, ?, 1, ?, ?) "
    "ON CONFLICT (name) DO NOTHING"
)


def replica_id() -> str:
    """This process among the replicas: host, pid and a random part (pids are reused)."""
    return f"{socket.gethostname()}/{os.getpid()}/{secrets.token_hex(4)}"


class AuditLease:
    """This replica's view of the lease; `held` is what the last claim or fence found."""

    def __init__(self, engine: Engine, ttl_ms: int, holder: str | None = None) -> None:
        self.engine = engine
        self.ttl_ms = ttl_ms
        self.holder = holder or replica_id()
        self.epoch: int | None = None  # the epoch of our hold, if we hold it
        self.held = False
        self._valid_until = 0.0  # monotonic: the hold's expiry, seen from before its claim

    def claim(self) -> bool:
        """Renew the lease, or take it when it is free or expired. Returns whether this
        replica holds it now; raises StoreError when the store is unavailable (the lease is
        then not held, as far as this replica can tell)."""
        started = time.monotonic()
        try:
            with self.engine.begin() as conn:
                self.held = self._claim(conn)
            if self.held:
                self._valid_until = started + self.ttl_ms / 1000
        except OperationalError as e:
            self.held = False
            raise store_error("store unavailable, the audit lease was not renewed", e) from None
        except SQLAlchemyError as e:
            self.held = False
            raise store_error("claiming the audit lease failed", e) from None
        return self.held

    @property
    def verified(self) -> bool:
        """Held, and the hold has not expired since its last renewal: a replica that was
        paused (SIGSTOP, a long GC, a frozen VM) past its lease says no at once, before its
        next claim finds another replica holding it. The monotonic clock runs on while a
        process is stopped."""
        return self.held and time.monotonic() < self._valid_until

    def _claim(self, conn: Connection) -> bool:
        if conn.dialect.name == "postgresql" and not conn.exec_driver_sql(_TRY_LOCK).scalar():
            return self.held  # another replica is claiming this instant; nothing changed
        now = int(conn.exec_driver_sql(_NOW[conn.dialect.name]).scalar_one())
        expires = now + self.ttl_ms
        # Every write is a compare-and-set on (holder, epoch): of two replicas that read the
        # same expired row, the second's update matches nothing.
        if self.epoch is not None and self._renew(conn, expires):
            return True
        row = conn.exec_driver_sql(driver_sql(conn, _READ), (NAME,)).first()
        if row is None:
            created = conn.exec_driver_sql(
                driver_sql(conn, _CREATE), (NAME, self.holder, now, expires)
            )
            self.epoch = 1 if created.rowcount == 1 else None
            return self.epoch is not None
        epoch, expires_at = int(row[0]), int(row[1])
        if expires_at > now:
            self.epoch = None
            return False
        taken = conn.exec_driver_sql(
            driver_sql(conn, _TAKE), (self.holder, epoch + 1, now, expires, NAME, epoch)
        )
        self.epoch = epoch + 1 if taken.rowcount == 1 else None
        return self.epoch is not None

    def _renew(self, conn: Connection, expires: int) -> bool:
        renewed = conn.exec_driver_sql(
            driver_sql(conn, _RENEW), (expires, NAME, self.holder, self.epoch)
        )
        return renewed.rowcount == 1

    def fence(self, conn: Connection) -> None:
        """Inside a save transaction: renew the lease if it is still ours, else raise
        LeaseLost (and the transaction, with everything it would have written, rolls back)."""
        now = int(conn.exec_driver_sql(_NOW[conn.dialect.name]).scalar_one())
        if self.epoch is None or not self._renew(conn, now + self.ttl_ms):
            self.held = False
            self.epoch = None
            raise LeaseLost("another replica holds the audit lease; this tick's verdicts dropped")

    def release(self) -> None:
        """On shutdown: let another replica take over at its next claim, not after expiry."""
        if self.epoch is None:
            return
        try:
            with self.engine.begin() as conn:
                self._renew(conn, 0)
        except SQLAlchemyError:
            pass  # it expires by itself
        self.held = False
        self.epoch = None
