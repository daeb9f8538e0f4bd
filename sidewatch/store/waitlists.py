"""The lists of recorded verdicts, a page at a time: a wait's place in them, (since,
requestId, thread) compared by code point, and the conditions of a page's query along
ix_wait_state_open_since."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection

from sidewatch.store.sql import key_lookups

# A wait's place in the lists: (since, requestId, thread), text compared by code point.
ListKey = tuple[int, str, str]


def index_only(conn: Connection) -> None:
    """On PostgreSQL, read a list's rows along its index in the index's order, even before the
    planner has statistics (a table grown within the last minute is estimated at a few rows,
    and a state's waits were then all read and sorted for a page)."""
    key_lookups(conn)
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("SET LOCAL enable_bitmapscan = off")


def collate(conn: Connection) -> str:
    """The collation that orders text by code point, as Python compares it (SQLite's own)."""
    return ' COLLATE "C"' if conn.dialect.name == "postgresql" else ""


def list_where(
    coll: str, policy: str | None, uncertain: bool | None, key: ListKey | None, op: str
) -> tuple[str, list[Any]]:
    """The conditions of a list's query beside its state, and their parameters: `op` ("<"
    or ">") compares a wait's key with `key`; `since` first, so the index's range is taken."""
    where, params = "", list[Any]()
    if policy is not None:
        where += " AND policy = ?"
        params.append(policy)
    if uncertain is not None:
        where += " AND uncertain = ?"
        params.append(uncertain)
    if key is not None:
        since, rid, thread = key
        where += (
            f" AND since {op}= ? AND (since {op} ? OR request_id{coll} {op} ? "
            f"OR (request_id{coll} = ? AND thread_id{coll} {op} ?))"
        )
        params += [since, since, rid, rid, thread]
    return where, params
