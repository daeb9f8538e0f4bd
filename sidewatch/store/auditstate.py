"""The auditor's records in the store: which threads are dirty or due, the latest verdict of
every wait and the batch that saves it with its transitions and findings. Beside it: the
transitions' rows (store.transitions), the totals (store.totals), the lists (store.waitlists)."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import groupby
from operator import attrgetter
from typing import Any, NamedTuple

from sqlalchemy import Connection, Engine, func, select
from sqlalchemy.exc import DBAPIError, OperationalError, SQLAlchemyError

from sidewatch.core.checkpoint import Checkpoint
from sidewatch.core.facts import FindingFact
from sidewatch.core.model import CLOSED_STATES, OPEN_STATES
from sidewatch.store.checkpoint import write as write_checkpoints
from sidewatch.store.db import QUERY_REFUSED, classified, failure, refused, store_error
from sidewatch.store.models import (
    DirtyThread,
    Meta,
    TransitionRow,
    WaitState,
    table_of,
)
from sidewatch.store.sql import (
    MARK_DIRTY,
    add_totals,
    bulk_insert,
    chunks,
    driver_sql,
    finding_key,
    insert_sql,
    key_lookups,
    running_totals,
)
from sidewatch.store.totals import (
    WAITS,
    Totals,
    finding_totals,
    ingest_totals,
    read_totals,
    split_wait_key,
    wait_key,
)
from sidewatch.store.transitions import (
    TRANSITION_ROW_COLS,
    StoredTransition,
    compact,
    expand,
)
from sidewatch.store.waitlists import ListKey, collate, index_only, list_where


class StoredState(NamedTuple):
    """The latest recorded verdict of one wait, as its `wait_state` row: a named tuple, not a
    dataclass, because it is that row (saved as it is, columns by field name) and a full
    audit builds one per wait (a third of a frozen dataclass's construction time)."""

    request_id: str
    thread_id: str
    policy: str
    state: str
    closed: bool
    since: int
    due_at: int | None
    requested_at: int
    decided_at: int | None
    receipt_at: int | None
    evaluated_at: int
    unreported: str = ""  # the never-reported evidence the verdict rests on, e.g. "route"
    uncertain: bool = False  # the verdict rests on an inference (Verdict.uncertain)


STATE_COLS = StoredState._fields
# Column names come from our own dataclasses, never from input. A wait is its thread and its
# requestId: two threads whose waits have the same requestId keep a record each.
UPSERT_STATE = "ON CONFLICT (thread_id, request_id) DO UPDATE SET " + ", ".join(
    f"{c} = excluded.{c}" for c in STATE_COLS if c not in ("thread_id", "request_id")
)
_CLOSED_STATES = frozenset(s.value for s in CLOSED_STATES)
_KEYS = 250  # (thread, requestId) pairs per statement: 500 variables, within SQLite's 999
_FINDING_COLS = ("rule", "at", "seq", "thread_id", "run_id", "interrupt_id", "key")


def copy_rows(
    conn: Connection, table: str, cols: Sequence[str], rows: Sequence[tuple[Any, ...]]
) -> None:
    """Insert `rows` with PostgreSQL's COPY, in the transaction of `conn`: a quarter of the
    driver's CPU of executemany, and half its time, for the rows of a full audit (measured:
    bench/audit.py). A refusal or an outage is raised as SQLAlchemy's error of it, as any
    statement's. Table and column names are our own, never input."""
    if not rows:
        return
    import psycopg  # noqa: PLC0415 - the PostgreSQL extra, there whenever its store is

    sql = f"COPY {table} ({', '.join(cols)}) FROM STDIN"
    try:
        with conn.connection.driver_connection.cursor() as cur, cur.copy(sql) as copy:  # type: ignore[union-attr]
            for row in rows:
                copy.write_row(row)
    except psycopg.Error as e:
        raise DBAPIError.instance(
            sql, None, e, psycopg.Error, hide_parameters=True, dialect=conn.dialect
        ) from None


_STAGED = "tmp_wait_state"  # a temporary table of each PostgreSQL session, emptied at commit


def _upsert_copied(conn: Connection, rows: list[tuple[Any, ...]]) -> Counter[tuple[str, str]]:
    """The wait_state upsert on PostgreSQL: the rows copied into a session's staging table,
    then upserted from it in one statement (a wait twice in the batch: its last row).
    Returns the running totals' moves of the rows it replaced (each uncounted: `WAITS`)."""
    out: Counter[tuple[str, str]] = Counter()
    if not rows:
        return out
    key = STATE_COLS.index("thread_id"), STATE_COLS.index("request_id")
    rows = list({(r[key[0]], r[key[1]]): r for r in rows}.values())
    if conn.exec_driver_sql(f"SELECT to_regclass('pg_temp.{_STAGED}')").scalar() is None:
        conn.exec_driver_sql(
            f"CREATE TEMPORARY TABLE {_STAGED} (LIKE wait_state INCLUDING DEFAULTS) "
            "ON COMMIT DELETE ROWS"
        )
    copy_rows(conn, _STAGED, STATE_COLS, rows)
    replaced = conn.exec_driver_sql(
        f"SELECT w.state, w.uncertain, w.policy, count(*) FROM {_STAGED} s "  # noqa: S608
        "JOIN wait_state w ON w.thread_id = s.thread_id AND w.request_id = s.request_id "
        "GROUP BY 1, 2, 3"
    )
    for state, unsure, policy, n in replaced:
        out[(WAITS, wait_key(state, unsure, policy))] -= int(n)
    names = ", ".join(STATE_COLS)
    conn.exec_driver_sql(
        f"INSERT INTO wait_state ({names}) SELECT {names} FROM {_STAGED} {UPSERT_STATE}"  # noqa: S608
    )
    return out


# A `meta` row set whether or not it is there yet (two writers may both find none).
SET_META = (
    "INSERT INTO meta (key, value) VALUES (?, ?) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
EVALUATED_UNTIL = "audit.evaluated_until"  # meta: the latest time a tick evaluated at (ms)
# A mark bumped by an ingest since it was read stays: that thread has newer evidence.
_CLEAR_DIRTY = "DELETE FROM dirty_thread WHERE thread_id = ? AND mark = ?"


log = logging.getLogger("sidewatch.store")


class AuditState:
    """Reads and writes of the auditor; every write is one transaction."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @contextmanager
    def _conn(self) -> Iterator[Connection]:
        with classified("store unavailable", QUERY_REFUSED), self.engine.connect() as conn:
            yield conn

    def dirty(self) -> list[tuple[str, int]]:
        """(thread, mark) of every thread with unclassified evidence."""
        table = table_of(DirtyThread)
        with self._conn() as c:
            return [(r[0], int(r[1])) for r in c.execute(select(table.c.thread_id, table.c.mark))]

    def tidy_dirty(self) -> None:
        """After a tick cleared many dirty marks: on PostgreSQL, vacuum their table. It is a
        queue, read whole at every tick; its deleted rows stay until a vacuum, and with
        autovacuum off (or before it comes round) an idle tick after a full audit of a million
        waits read a million dead rows (52 ms, against 2 ms once vacuumed)."""
        if self.engine.dialect.name != "postgresql":
            return
        try:
            with self.engine.connect() as conn:
                conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(
                    "VACUUM dirty_thread"
                )
        except SQLAlchemyError as e:  # only a speed-up: autovacuum does it in time
            log.info("could not vacuum dirty_thread: %s", failure(e))

    def due(self, now: int) -> list[str]:
        """Threads with an open wait whose verdict time alone has changed by `now`, the
        longest overdue first (a budgeted tick takes them in this order)."""
        table = table_of(WaitState)
        # No DISTINCT: it would make SQLite scan every wait instead of the due_at range.
        query = select(table.c.thread_id).where(table.c.due_at <= now).order_by(table.c.due_at)
        with self._conn() as c:
            key_lookups(c)
            return list(dict.fromkeys(str(r[0]) for r in c.execute(query)))

    def mark_evaluated_after(self, at: int, until: int) -> int:
        """Mark dirty every thread with a verdict evaluated after `at` (by a clock that has
        gone back since), and keep `until` as the latest time evaluated at, in one
        transaction; returns how many threads were marked. A scan of the waits (evaluated_at
        has no index, which every save would write): the auditor asks once a clock goes back."""
        with classified("store unavailable", QUERY_REFUSED), self.engine.begin() as c:
            threads = [
                (str(r[0]),)
                for r in c.exec_driver_sql(
                    driver_sql(
                        c, "SELECT DISTINCT thread_id FROM wait_state WHERE evaluated_at > ?"
                    ),
                    (at,),
                )
            ]
            if threads:
                c.exec_driver_sql(driver_sql(c, MARK_DIRTY), threads)
            c.exec_driver_sql(driver_sql(c, SET_META), (EVALUATED_UNTIL, str(until)))
        return len(threads)

    def evaluated_until(self) -> int | None:
        """The latest time a tick evaluated at, as last kept (`keep_evaluated_until`)."""
        with self._conn() as c:
            value = c.exec_driver_sql(
                driver_sql(c, "SELECT value FROM meta WHERE key = ?"), (EVALUATED_UNTIL,)
            ).scalar()
        return None if value is None else int(value)

    def keep_evaluated_until(self, at: int) -> None:
        with classified("store unavailable", QUERY_REFUSED), self.engine.begin() as c:
            c.exec_driver_sql(driver_sql(c, SET_META), (EVALUATED_UNTIL, str(at)))

    def records(self, thread_ids: Collection[str]) -> dict[tuple[str, str], StoredState]:
        """The recorded verdict of every wait of these threads, by (thread, requestId)."""
        ids = list(thread_ids)
        sql = f"SELECT {', '.join(STATE_COLS)} FROM wait_state WHERE thread_id IN "  # noqa: S608
        out: dict[tuple[str, str], StoredState] = {}
        with self._conn() as conn:
            key_lookups(conn)
            for part in chunks(ids):
                query = driver_sql(conn, sql + f"({', '.join('?' for _ in part)})")
                for r in conn.exec_driver_sql(query, tuple(part)):
                    s = StoredState(*r)
                    out[(s.thread_id, s.request_id)] = s
        return out

    def records_of(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], StoredState]:
        """The recorded verdicts of these waits, by (thread, requestId): each looked up by its
        key, so what is read is what is asked, not the threads' history (a joined VALUES list:
        SQLite scans the table for a row-value IN)."""
        wanted = list(dict.fromkeys(keys))
        cols = ", ".join(f"w.{c}" for c in STATE_COLS)
        out: dict[tuple[str, str], StoredState] = {}
        with self._conn() as conn:
            key_lookups(conn)
            for part in chunks(wanted, _KEYS):
                query = driver_sql(
                    conn,
                    f"SELECT {cols} FROM (VALUES {', '.join('(?, ?)' for _ in part)}) AS k "  # noqa: S608
                    "JOIN wait_state w ON w.thread_id = k.column1 AND w.request_id = k.column2",
                )
                for r in conn.exec_driver_sql(query, tuple(x for key in part for x in key)):
                    s = StoredState(*r)
                    out[(s.thread_id, s.request_id)] = s
        return out

    def states(self, thread_ids: Collection[str]) -> dict[str, StoredState]:
        """The recorded verdicts of these threads by requestId alone (of two threads' waits
        with the same requestId, one): for looking a known wait up."""
        return {rid: s for (_, rid), s in self.records(thread_ids).items()}

    def save(
        self,
        states: Sequence[StoredState],
        transitions: Sequence[StoredTransition],
        findings: Sequence[FindingFact],
        cleared: Sequence[tuple[str, int]],
        fence: Callable[[Connection], None] | None = None,
        *,
        checkpoints: Sequence[Checkpoint] = (),
        dropped: Sequence[str] = (),
        settled: Sequence[tuple[str, str, int, bytes]] = (),
        renewed: Sequence[str] = (),
    ) -> None:
        """Record one batch of verdicts at once: states, transitions, findings (a finding
        already stored is not stored again), and clear the dirty marks read before the batch.
        `checkpoints` (of long threads, resting on these verdicts) replace the threads' old
        ones, and those of `dropped` are deleted (store.checkpoint), with the stored bodies of
        their settled waits: `settled` are stored, after the old ones of `renewed` are deleted.
        `fence` runs first in the same transaction and may refuse it (store.lease). Raises
        StoreError for an outage, StoreRefused when the database refuses a value of it."""
        try:
            with (
                classified(
                    "store unavailable, the tick's verdicts were not saved",
                    "the store refused a verdict",
                ),
                self.engine.begin() as conn,
            ):
                if fence is not None:
                    fence(conn)
                # Straight to the driver: a full audit writes a row per wait.
                rows: list[tuple[Any, ...]] = list(states)  # each one its row
                moved = _counted(states)  # the totals' moves: the new rows, less the old
                if conn.dialect.name == "postgresql":
                    moved.update(_upsert_copied(conn, rows))
                    copy_rows(conn, "transition", TRANSITION_ROW_COLS, compact(transitions))
                else:
                    moved.update(_replaced(conn, states))  # before the rows replace them
                    bulk_insert(conn, "wait_state", STATE_COLS, rows, UPSERT_STATE)
                    bulk_insert(conn, "transition", TRANSITION_ROW_COLS, compact(transitions))
                found = _insert_findings(conn, findings)
                found.update(moved)
                if cleared:
                    conn.exec_driver_sql(driver_sql(conn, _CLEAR_DIRTY), list(cleared))
                if checkpoints or dropped:
                    write_checkpoints(conn, checkpoints, dropped, settled, renewed)
                add_totals(conn, found)  # last: see add_totals
        except (OverflowError, UnicodeError) as e:  # the driver's own refusal of a value
            raise refused("the store refused a verdict", e) from None

    def policies_changed(self, fingerprint: str) -> int:
        """When the policies differ from those the stored verdicts used, mark every thread
        with an open wait dirty (its verdict may change), drop the long threads' checkpoints
        and remember the new policies. Returns how many threads were marked."""
        meta, ws = table_of(Meta), table_of(WaitState)
        try:
            with self.engine.begin() as conn:
                old = conn.execute(
                    select(meta.c.value).where(meta.c.key == "policies")
                ).scalar_one_or_none()
                if old == fingerprint:
                    return 0
                threads = [
                    (r[0],)
                    for r in conn.execute(
                        select(ws.c.thread_id).where(ws.c.closed.is_(False)).distinct()
                    )
                ]
                if threads:
                    conn.exec_driver_sql(driver_sql(conn, MARK_DIRTY), threads)
                # Settled verdicts rest on the old policies too: each thread is evaluated
                # whole once more under the new ones (app.evaluate).
                conn.exec_driver_sql("DELETE FROM thread_checkpoint")
                conn.exec_driver_sql("DELETE FROM settled_wait")  # their kept waits too
                # An upsert: replicas starting together on an empty store all read no row,
                # and an INSERT failed every one but the first (a UniqueViolation at start).
                conn.exec_driver_sql(driver_sql(conn, SET_META), ("policies", fingerprint))
                return len(threads)
        except OperationalError as e:
            raise store_error("store unavailable", e) from None

    def select(self, states: Collection[str], limit: int) -> list[tuple[str, str]]:
        """(requestId, thread) of up to `limit` waits whose last verdict is in `states`,
        longest in their state first. Each state's first `limit` are read along
        ix_wait_state_open_since (closed, state, since), then merged: what is read does not
        grow with the closed waits the store keeps (one `state IN (…) ORDER BY since` sorted
        every wait in those states, on every GET /v1/waits)."""
        chosen = sorted(set(states))
        if not chosen:
            return []
        part = (
            "SELECT * FROM (SELECT request_id, thread_id, since FROM wait_state "
            "WHERE closed = ? AND state = ? ORDER BY since, request_id LIMIT ?) AS s{}"
        )
        sql = " UNION ALL ".join(part.format(k) for k in range(len(chosen)))
        params: list[Any] = [x for s in chosen for x in (s in _CLOSED_STATES, s, limit)]
        with self._conn() as c:
            key_lookups(c)
            rows = c.exec_driver_sql(
                driver_sql(c, f"{sql} ORDER BY since, request_id LIMIT ?"), (*params, limit)
            )
            return [(str(r[0]), str(r[1])) for r in rows]

    def listed(
        self,
        states: Collection[str],
        limit: int,
        *,
        after: ListKey | None = None,
        backward: bool = False,
        policy: str | None = None,
        uncertain: bool | None = None,
    ) -> list[StoredState]:
        """Up to `limit` recorded verdicts in `states` (of `policy`, `uncertain`: None for any)
        in the lists' order, (since, requestId, thread) compared by code point, from just
        after `after` (None: the first); `backward`: from just before it, nearest first.
        Each state's part is a range of ix_wait_state_open_since, then merged: what is read
        is the page, not the waits before it."""
        chosen = sorted(set(states))
        if not chosen or limit < 1:
            return []
        with self._conn() as c:
            index_only(c)
            coll = collate(c)
            order = ", ".join(
                f"{col}{coll if col != 'since' else ''}{' DESC' if backward else ''}"
                for col in ("since", "request_id", "thread_id")
            )
            where, params = list_where(coll, policy, uncertain, after, "<" if backward else ">")
            part = (
                f"SELECT * FROM (SELECT {', '.join(STATE_COLS)} FROM wait_state "  # noqa: S608
                f"WHERE closed = ? AND state = ?{where} ORDER BY {order} LIMIT ?) AS s{{}}"
            )
            sql = " UNION ALL ".join(part.format(k) for k in range(len(chosen)))
            args: list[Any] = [
                x for st in chosen for x in (st in _CLOSED_STATES, st, *params, limit)
            ]
            rows = c.exec_driver_sql(
                driver_sql(c, f"SELECT * FROM ({sql}) AS u ORDER BY {order} LIMIT ?"),  # noqa: S608
                (*args, limit),
            )
            return [StoredState(*r) for r in rows]

    def counted(
        self,
        states: Collection[str],
        *,
        policy: str | None = None,
        uncertain: bool | None = None,
        before: ListKey | None = None,
    ) -> dict[str, int]:
        """How many recorded verdicts each of `states` holds (of `policy`, `uncertain`: None
        for any), from the store's running totals (kept as the rows are written: `WAITS`);
        those before `before` in the lists' order only, counted along
        ix_wait_state_open_since. Never from a page."""
        chosen = sorted(set(states))
        if not chosen:
            return {}
        if before is None:  # the store's running totals: a fixed set of rows
            with self._conn() as c:
                kept = running_totals(c, WAITS)
            out = dict.fromkeys(chosen, 0)
            for (_, key), n in kept.items():
                st, unsure, pol = split_wait_key(key)
                if st in out and policy in (None, pol) and uncertain in (None, unsure):
                    out[st] += n
            return out
        with self._conn() as c:
            index_only(c)
            where, params = list_where(collate(c), policy, uncertain, before, "<")
            part = f"SELECT ?, count(*) FROM wait_state WHERE closed = ? AND state = ?{where}"  # noqa: S608
            sql = " UNION ALL ".join(part for _ in chosen)
            args = [x for st in chosen for x in (st, st in _CLOSED_STATES, st, *params)]
            return {str(st): int(n) for st, n in c.exec_driver_sql(driver_sql(c, sql), tuple(args))}

    def problems(self, states: Collection[str]) -> list[tuple[str, str, str, int, str, str, str]]:
        """(requestId, state, policy, since, evidence, thresholds, unreported) of every wait
        now in one of `states`, with the evidence and thresholds of its latest recorded
        transition."""
        sql = (
            "SELECT w.request_id, w.state, w.policy, w.since, t.evidence, t.thresholds, "  # noqa: S608
            "w.unreported "
            "FROM wait_state w LEFT JOIN transition t ON t.id = "
            "(SELECT max(id) FROM transition "
            "WHERE request_id = w.request_id AND thread_id = w.thread_id) "
            f"WHERE w.state IN ({', '.join('?' for _ in states)})"
        )
        with self._conn() as c:
            return [
                (str(r[0]), str(r[1]), str(r[2]), int(r[3]), r[4] or "{}", r[5] or "{}", r[6] or "")
                for r in c.exec_driver_sql(driver_sql(c, sql), tuple(states))
            ]

    def oldest_since(self) -> dict[str, int]:
        """When the oldest open wait of each state entered it (index-only lookups)."""
        table = table_of(WaitState)
        out: dict[str, int] = {}
        with self._conn() as conn:
            for state in map(str, OPEN_STATES):
                query = select(func.min(table.c.since)).where(
                    table.c.closed.is_(False), table.c.state == state
                )
                value = conn.execute(query).scalar_one_or_none()
                if value is not None:
                    out[state] = int(value)
        return out

    def finding_counts(self) -> dict[str, int]:
        """Protocol findings by rule, ever (pruned ones too): noticed at ingest, or recorded
        from verdicts (each (rule, wait) once). Read from the store's totals, kept as the
        rows are inserted (store.sql.add_totals): a tick does not count the finding table."""
        with self._conn() as c:
            return finding_totals(c)

    def totals(self) -> Totals:
        with self._conn() as c:
            return read_totals(c)

    def ingest_totals(self) -> tuple[Counter[str], Counter[str]]:
        """Lines ingested by kind and rejected by reason, by every replica, ever."""
        with self._conn() as c:
            return ingest_totals(c)

    def transitions_of(
        self, request_id: str, thread_id: str | None = None
    ) -> list[StoredTransition]:
        """The recorded transitions of a wait (of `thread_id`, else of every thread whose wait
        has this requestId), oldest first, each with the thresholds and evidence it was
        recorded with."""
        table = table_of(TransitionRow)
        query = select(*(table.c[k] for k in TRANSITION_ROW_COLS)).where(
            table.c.request_id == request_id
        )
        if thread_id is not None:
            query = query.where(table.c.thread_id == thread_id)
        with self._conn() as c:
            return expand([tuple(r) for r in c.execute(query.order_by(table.c.id))])


def _counted(states: Sequence[StoredState]) -> Counter[tuple[str, str]]:
    """The totals of `states` (of a wait twice, the last row: the one that stays)."""
    latest = {(s.thread_id, s.request_id): s for s in states}
    return Counter((WAITS, wait_key(s.state, s.uncertain, s.policy)) for s in latest.values())


def _replaced(conn: Connection, states: Sequence[StoredState]) -> Counter[tuple[str, str]]:
    """The totals' moves when the rows of `states` replace what is recorded of their waits:
    each recorded one uncounted, read in the transaction that writes them (exact, whoever
    else writes). SQLite's path; PostgreSQL's joins its staged rows (_upsert_copied)."""
    out: Counter[tuple[str, str]] = Counter()
    keys = list(dict.fromkeys((s.thread_id, s.request_id) for s in states))
    for part in chunks(keys, _KEYS):
        query = driver_sql(
            conn,
            "SELECT w.state, w.uncertain, w.policy, count(*) "  # noqa: S608 - our own
            f"FROM (VALUES {', '.join('(?, ?)' for _ in part)}) AS k "
            "JOIN wait_state w ON w.thread_id = k.column1 AND w.request_id = k.column2 "
            "GROUP BY 1, 2, 3",
        )
        for state, unsure, policy, n in conn.exec_driver_sql(
            query, tuple(x for p in part for x in p)
        ):
            out[(WAITS, wait_key(state, unsure, policy))] -= int(n)
    return out


_RULES = attrgetter("rule")


def _insert_findings(conn: Connection, findings: Sequence[FindingFact]) -> Counter[tuple[str, str]]:
    """Insert the findings not stored yet, a statement per rule; returns how many rows of each
    rule were inserted (a conflict, also with another writer's same finding, is no row)."""
    sql = insert_sql(conn, "finding", _FINDING_COLS, "ON CONFLICT (key) DO NOTHING")
    found: Counter[tuple[str, str]] = Counter()
    for rule, part in groupby(sorted(findings, key=_RULES), key=_RULES):
        rows = [
            (
                f.rule,
                f.at,
                f.seq,
                f.thread_id,
                f.run_id,
                f.interrupt_id,
                finding_key(f.rule, f.thread_id, f.run_id, f.interrupt_id),
            )
            for f in part
        ]
        found[("findings", rule)] += conn.exec_driver_sql(sql, rows).rowcount
    return found
