"""Service heartbeats: one row per service instance (its latest beat, upserted), a row per
change, and the threads bound to an instance; expanded at load into the bound threads'
ordinary heartbeat facts.

A thread bound to an instance with `durable` is kept alive by a beat of any instance of the
service (another replica, or the restarted process: the checkpoint outlives the process); one
bound without it only by its own instance's beats (a restarted process is a new instance, so its
old waits go stale: their checkpoint died with it).

Marking for re-audit is cheap: a beat changes a verdict only where the wait is `ORPHANED` since
after the previous beat it would count (a stale heartbeat), so only those threads are marked
dirty; every other bound wait is audited again when its freshness would run out (`due_at`), and
the newer beat is read then.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, and_, case, func, or_, select, true, union_all

from sidewatch.core.facts import HeartbeatFact, ServiceBeatFact, ServiceBindFact
from sidewatch.store.models import (
    ServiceBindingRow,
    ServiceChangeRow,
    ServiceHeartbeatRow,
    WaitState,
    table_of,
)
from sidewatch.store.sql import MARK_DIRTY, chunks, driver_sql

_BEAT, _CHANGE, _BIND = (
    table_of(ServiceHeartbeatRow),
    table_of(ServiceChangeRow),
    table_of(ServiceBindingRow),
)


def _upsert(conn: Connection) -> Any:
    """The dialect's INSERT … ON CONFLICT; PostgreSQL's module loads only on PostgreSQL (a
    read-only command on SQLite then never loads it)."""
    if conn.dialect.name == "sqlite":
        from sqlalchemy.dialects.sqlite import insert  # noqa: PLC0415 (the dialect in use)

        return insert
    from sqlalchemy.dialects.postgresql import insert as pg_insert  # noqa: PLC0415 (ditto)

    return pg_insert


def write_beats(conn: Connection, beats: Sequence[ServiceBeatFact]) -> None:
    """Upsert the latest beat of each instance (a unit's beats of one instance are one write),
    record each change, and mark the threads a beat revives."""
    latest: dict[tuple[str, str], ServiceBeatFact] = {}
    first: dict[tuple[str, str], ServiceBeatFact] = {}
    for b in beats:
        k = (b.service, b.instance)
        if k not in latest or (b.at, b.seq) > (latest[k].at, latest[k].seq):
            latest[k] = b
        if k not in first or (b.at, b.seq) < (first[k].at, first[k].seq):
            first[k] = b
    upsert = _upsert(conn)
    for (service, instance), b in sorted(latest.items()):
        before = conn.execute(
            select(_BEAT.c.instance, _BEAT.c.last_at).where(_BEAT.c.service == service)
        ).all()
        prev_service = max((int(r[1]) for r in before), default=None)
        prev_instance = next((int(r[1]) for r in before if r[0] == instance), None)
        f = first[(service, instance)]
        stmt = upsert(_BEAT).values(
            service=service,
            instance=instance,
            durable=b.durable,
            first_at=f.at,
            first_seq=f.seq,
            last_at=b.at,
            last_seq=b.seq,
        )
        ex = stmt.excluded
        newer = ex.last_at > _BEAT.c.last_at
        older = ex.first_at < _BEAT.c.first_at
        conn.execute(
            stmt.on_conflict_do_update(
                index_elements=["service", "instance"],
                set_={
                    "last_at": func.max(_BEAT.c.last_at, ex.last_at)
                    if conn.dialect.name == "sqlite"
                    else func.greatest(_BEAT.c.last_at, ex.last_at),
                    "last_seq": _case(newer, ex.last_seq, _BEAT.c.last_seq),
                    "durable": _case(newer, ex.durable, _BEAT.c.durable),
                    "first_at": _case(older, ex.first_at, _BEAT.c.first_at),
                    "first_seq": _case(older, ex.first_seq, _BEAT.c.first_seq),
                },
            )
        )
        conn.execute(
            upsert(_CHANGE)
            .values(service=service, instance=instance, durable=b.durable, at=f.at, seq=f.seq)
            .on_conflict_do_nothing(index_elements=["service", "instance", "durable"])
        )
        _mark_revived(conn, service, instance, prev_service, prev_instance)


def _case(cond: Any, then: Any, otherwise: Any) -> Any:
    return case((cond, then), else_=otherwise)


def _mark_revived(
    conn: Connection,
    service: str,
    instance: str,
    prev_service: int | None,
    prev_instance: int | None,
) -> None:
    """Mark the bound threads whose open wait went `ORPHANED` after the last beat that would
    have kept it alive: this beat may make it `WAITING` again."""
    state = table_of(WaitState)
    durable = _BIND.c.durable.is_(True)
    kept = [and_(durable, state.c.since > prev_service if prev_service is not None else true())]
    kept.append(
        and_(
            _BIND.c.durable.is_(False),
            _BIND.c.instance == instance,
            state.c.since > prev_instance if prev_instance is not None else true(),
        )
    )
    query = (
        select(_BIND.c.thread_id)
        .distinct()
        .join(state, state.c.thread_id == _BIND.c.thread_id)
        .where(
            _BIND.c.service == service,
            state.c.closed.is_(False),
            state.c.state == "ORPHANED",
            or_(*kept),
        )
    )
    threads = [(str(r[0]),) for r in conn.execute(query)]
    if threads:
        conn.exec_driver_sql(driver_sql(conn, MARK_DIRTY), threads)


def expand(conn: Connection, thread_ids: Collection[str] | None) -> dict[str, list[HeartbeatFact]]:
    """The heartbeat facts of the threads' bindings (all threads' when None): the binding
    itself (the instance holds a handle for the waits it raised) and each beat since that
    counts for it (first and latest of each instance that keeps it alive)."""
    return _expanded(conn, list(_bindings(conn, thread_ids)))


def expand_runs(
    conn: Connection, thread: str, runs: Collection[str], whole: bool = True
) -> list[HeartbeatFact]:
    """expand() of one thread's bindings to the thread (but with `whole` False) and to one of
    `runs` only (a checkpoint's suffix: the others feed none of its waits), read by (thread,
    run)."""
    cols = _bind_columns()
    queries = []
    if whole:
        queries.append(select(*cols).where(_BIND.c.thread_id == thread, _BIND.c.run_id.is_(None)))
    for part in chunks(sorted(runs)):
        queries.append(select(*cols).where(_BIND.c.thread_id == thread, _BIND.c.run_id.in_(part)))
    if not queries:
        return []
    rows = conn.execute(union_all(*queries)) if len(queries) > 1 else conn.execute(queries[0])
    return _expanded(conn, [_bind_fact(r) for r in rows]).get(thread, [])


def _expanded(
    conn: Connection, bindings: Sequence[ServiceBindFact]
) -> dict[str, list[HeartbeatFact]]:
    if not bindings:
        return {}
    services = sorted({b.service for b in bindings})
    rows: dict[str, list[tuple[str, int, int, int, int]]] = defaultdict(list)
    cols = (_BEAT.c.service, _BEAT.c.instance, _BEAT.c.first_at, _BEAT.c.first_seq)
    for part in chunks(services):
        query = select(*cols, _BEAT.c.last_at, _BEAT.c.last_seq).where(_BEAT.c.service.in_(part))
        for service, inst, f_at, f_seq, l_at, l_seq in conn.execute(query):
            rows[str(service)].append((str(inst), int(f_at), int(f_seq), int(l_at), int(l_seq)))
    out: dict[str, list[HeartbeatFact]] = defaultdict(list)
    for b in bindings:
        beats = out[b.thread_id]
        beats.append(
            HeartbeatFact(
                thread_id=b.thread_id,
                at=b.at,
                seq=b.seq,
                run_id=b.run_id,
                handle=True,
                bound=True,
            )
        )
        for inst, f_at, f_seq, l_at, l_seq in rows.get(b.service, ()):
            if not b.durable and inst != b.instance:
                continue
            for at, seq in {(f_at, f_seq), (l_at, l_seq)}:
                if at >= b.at:
                    beats.append(
                        HeartbeatFact(
                            thread_id=b.thread_id, at=at, seq=seq, run_id=b.run_id, bound=True
                        )
                    )
    return out


def _bind_columns() -> tuple[Any, ...]:
    b = _BIND.c
    return (b.thread_id, b.run_id, b.service, b.instance, b.durable, b.at, b.seq)


def _bind_fact(row: Sequence[Any]) -> ServiceBindFact:
    thread, run, service, inst, durable, at, seq = row
    return ServiceBindFact(
        thread_id=thread,
        run_id=run,
        service=service,
        instance=inst,
        durable=bool(durable),
        at=int(at),
        seq=int(seq),
    )


def _bindings(conn: Connection, thread_ids: Collection[str] | None) -> Iterable[ServiceBindFact]:
    cols = _bind_columns()
    if thread_ids is None:
        parts: Iterable[Sequence[str] | None] = [None]
    else:
        parts = chunks(sorted(thread_ids))
    for part in parts:
        query = select(*cols) if part is None else select(*cols).where(_BIND.c.thread_id.in_(part))
        yield from map(_bind_fact, conn.execute(query))


def write_bindings(conn: Connection, bindings: Sequence[ServiceBindFact]) -> None:
    if not bindings:
        return
    conn.execute(
        _upsert(conn)(_BIND)
        .values(
            [
                {
                    "key": b.key,
                    "thread_id": b.thread_id,
                    "run_id": b.run_id,
                    "service": b.service,
                    "instance": b.instance,
                    "durable": b.durable,
                    "at": b.at,
                    "seq": b.seq,
                }
                for b in bindings
            ]
        )
        .on_conflict_do_nothing(index_elements=["key"])
    )


@dataclass(frozen=True, slots=True)
class Bound:
    """A binding of a wait's thread to a service instance, as the tap (or runtime) reported
    it: whether the run survives the process (`durable`), and the instance's latest beat."""

    service: str
    instance: str
    durable: bool
    at: int  # when bound (ms)
    run_id: str | None  # None: every wait of the thread
    last_beat_at: int | None  # the instance's latest beat; None: it never beat


def bound_to(conn: Connection, thread: str, run: str | None) -> list[Bound]:
    """The bindings of `thread` that hold a wait of `run` (the thread's own and the run's),
    oldest first, each with its instance's latest beat: by (thread, run), one statement."""
    runs = (
        _BIND.c.run_id.is_(None)
        if run is None
        else or_(_BIND.c.run_id.is_(None), _BIND.c.run_id == run)
    )
    query = (
        select(*_bind_columns(), _BEAT.c.last_at)
        .select_from(
            _BIND.outerjoin(
                _BEAT,
                and_(_BEAT.c.service == _BIND.c.service, _BEAT.c.instance == _BIND.c.instance),
            )
        )
        .where(_BIND.c.thread_id == thread, runs)
        .order_by(_BIND.c.at, _BIND.c.seq)
    )
    out = []
    for row in conn.execute(query):
        b = _bind_fact(row[:7])
        last = None if row[7] is None else int(row[7])
        out.append(Bound(b.service, b.instance, b.durable, b.at, b.run_id, last))
    return out
