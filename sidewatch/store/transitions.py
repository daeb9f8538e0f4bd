"""The auditor's transitions as stored: a row a recording, not a row a transition (`compact`
and `expand`), and the transitions they hold counted by the database (`count_moves`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from operator import attrgetter
from typing import Any, NamedTuple

import orjson
from sqlalchemy import Connection

from sidewatch.store.sql import driver_sql


class StoredTransition(NamedTuple):
    """One transition with the policy, thresholds and evidence (JSON) of the verdict that
    recorded it. Stored compactly: the transitions one verdict recorded are one row, the last
    one's, carrying their thresholds and evidence once and the earlier moves as JSON (see
    `compact` and `expand`). A named tuple for the reason StoredState is one."""

    request_id: str
    thread_id: str
    from_state: str | None
    to_state: str
    at: int
    recorded_at: int
    policy: str
    thresholds: str
    evidence: str


TRANSITION_COLS = StoredTransition._fields
# A stored transition row: the last transition of a recording, and the ones before it.
TRANSITION_ROW_COLS = (*TRANSITION_COLS, "earlier")


_WAIT = attrgetter("thread_id", "request_id", "recorded_at")
_SHARED = attrgetter("thresholds", "evidence")
_THRESHOLDS, _EVIDENCE = TRANSITION_COLS.index("thresholds"), TRANSITION_COLS.index("evidence")
_EARLIER = TRANSITION_ROW_COLS.index("earlier")


def compact(transitions: Sequence[StoredTransition]) -> list[tuple[Any, ...]]:
    """The rows of `transitions` in order (TRANSITION_ROW_COLS): the transitions of one wait
    and recording with the same thresholds and evidence are one row, the last one's, whose
    `earlier` holds the moves before it as JSON `[[from, to, at], ...]` (None: no move
    before it). A row a recording, not a row a transition: the rows are most of what a full
    audit writes (bench/store_shape.py)."""
    rows: list[tuple[Any, ...]] = []
    before: list[tuple[str | None, str, int]] = []
    last = len(transitions) - 1
    for k, t in enumerate(transitions):
        if k < last:
            n = transitions[k + 1]
            if _WAIT(n) == _WAIT(t) and _SHARED(n) == _SHARED(t):
                before.append((t.from_state, t.to_state, t.at))
                continue
        earlier = orjson.dumps(before).decode() if before else None
        rows.append((*t, earlier))
        before = []
    return rows


def moves(earlier: str | None) -> list[tuple[str | None, str, int]]:
    """The (from, to, at) of the transitions a row's `earlier` holds, in order."""
    if earlier is None:
        return []
    return [(m[0], m[1], int(m[2])) for m in orjson.loads(earlier)]


def expand(rows: Sequence[tuple[Any, ...]]) -> list[StoredTransition]:
    """Stored transition rows (TRANSITION_ROW_COLS) of one or more waits, in id order, as
    their transitions: each row's earlier moves, then its own, all with its thresholds and
    evidence (see `compact`; every row sidewatch 0.1.0 writes or opens carries them)."""
    out: list[StoredTransition] = []
    for r in rows:
        request, thread, recorded, policy = r[0], r[1], r[5], r[6]
        thresholds, evidence = r[_THRESHOLDS], r[_EVIDENCE]
        for frm, to, at in moves(r[_EARLIER]):
            out.append(
                StoredTransition(
                    request, thread, frm, to, at, recorded, policy, thresholds, evidence
                )
            )
        out.append(StoredTransition(*r[:_EARLIER]))
    return out


def count_moves(
    conn: Connection, where: str = "", params: Sequence[Any] = ()
) -> Counter[tuple[str | None, str, str]]:
    """(from, to, policy) -> transitions of the rows of `transition` matching `where` (SQL
    on its columns, our own; "" for all): each row's own and its earlier ones."""
    counts: Counter[tuple[str | None, str, str]] = Counter()
    cond = f"WHERE {where}" if where else ""
    more = f"WHERE {where} AND earlier IS NOT NULL" if where else "WHERE earlier IS NOT NULL"
    # The earlier ones unpacked by the database: a restart counts every stored transition.
    if conn.dialect.name == "postgresql":
        unpacked = (
            "SELECT m->>0, m->>1, policy, count(*) FROM transition, "  # noqa: S608 (ours)
            f"json_array_elements(earlier::json) AS m {more} GROUP BY 1, 2, 3"
        )
    else:
        unpacked = (
            "SELECT json_extract(m.value, '$[0]'), json_extract(m.value, '$[1]'), policy, "  # noqa: S608
            f"count(*) FROM transition, json_each(transition.earlier) AS m {more} "
            "GROUP BY 1, 2, 3"
        )
    own = (
        f"SELECT from_state, to_state, policy, count(*) FROM transition {cond} "  # noqa: S608
        "GROUP BY from_state, to_state, policy"
    )
    for sql in (own, unpacked):
        for frm, to, policy, n in conn.exec_driver_sql(driver_sql(conn, sql), tuple(params)):
            counts[(frm, to, policy)] += int(n)
    return counts
