"""packed transitions: the transitions one verdict recorded are one row

The row of a recording's last transition (which since 0008 alone carries the recording's
thresholds and evidence) holds the transitions before it in `earlier`, as JSON
`[[from, to, at], ...]`; their own rows (thresholds and evidence NULL) go. A full audit then
writes one transition row a wait instead of about 2.7 (bench/store_shape.py: the transitions'
part of its write floor 0.4 times today's, on SQLite and PostgreSQL). Every transition is
kept, in its order, with the thresholds and evidence it showed (store.auditstate.expand); a
NULL row with no later row of its recording to join is left as it is, and shows what it
showed. The downgrade gives every transition its row again, numbered anew in the same order,
and restarts retention's scan of closing transitions (its place is a row id).

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-02 02:10:00.000000
"""

from __future__ import annotations

from typing import Any

import orjson
import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

_CHUNK = 10_000
_COLS = "request_id, thread_id, from_state, to_state, at, recorded_at, policy, thresholds, evidence"


def _many(sql: str, rows: list[tuple[Any, ...]]) -> None:
    """executemany in the driver's parameter style (`?` written here)."""
    if not rows:
        return
    bind = op.get_bind()
    if bind.dialect.paramstyle != "qmark":
        sql = sql.replace("?", "%s")
    bind.exec_driver_sql(sql, rows)


def upgrade() -> None:
    with op.batch_alter_table("transition") as batch:
        batch.add_column(sa.Column("earlier", sa.Text(), nullable=True))
    bind = op.get_bind()
    # Each wait's rows in id order; a NULL row is one that shares the next row's recording.
    rows = bind.exec_driver_sql(
        "SELECT id, request_id, thread_id, from_state, to_state, at, recorded_at, "
        "thresholds IS NULL AND evidence IS NULL FROM transition "
        "ORDER BY request_id, thread_id, id"
    ).all()
    updates: list[tuple[Any, ...]] = []
    deletes: list[tuple[Any, ...]] = []
    pending: list[tuple[Any, ...]] = []  # NULL rows of one wait and recording, in order
    for r in rows:
        last = pending[-1] if pending else None
        if last is not None and (last[1], last[2], last[6]) != (r[1], r[2], r[6]):
            pending = []  # nothing of their recording after them: left as they are
        if r[7]:
            pending.append(r)
            continue
        if pending:
            moves = [[p[3], p[4], int(p[5])] for p in pending]
            updates.append((orjson.dumps(moves).decode(), r[0]))
            deletes += [(p[0],) for p in pending]
            pending = []
    for k in range(0, len(updates), _CHUNK):
        _many("UPDATE transition SET earlier = ? WHERE id = ?", updates[k : k + _CHUNK])
    for k in range(0, len(deletes), _CHUNK):
        _many("DELETE FROM transition WHERE id = ?", deletes[k : k + _CHUNK])


def downgrade() -> None:
    bind = op.get_bind()
    rows = bind.exec_driver_sql(f"SELECT {_COLS}, earlier FROM transition ORDER BY id").all()  # noqa: S608
    out: list[tuple[Any, ...]] = []
    for r in rows:
        if r[9] is not None:
            for frm, to, at in orjson.loads(r[9]):
                out.append((len(out) + 1, r[0], r[1], frm, to, int(at), r[5], r[6], None, None))
        out.append((len(out) + 1, *r[:9]))
    bind.exec_driver_sql("DELETE FROM transition")
    with op.batch_alter_table("transition") as batch:
        batch.drop_column("earlier")
    marks = ", ".join("?" for _ in range(10))
    for k in range(0, len(out), _CHUNK):
        _many(f"INSERT INTO transition (id, {_COLS}) VALUES ({marks})", out[k : k + _CHUNK])  # noqa: S608
    if bind.dialect.name == "postgresql":
        bind.exec_driver_sql(
            "SELECT setval(pg_get_serial_sequence('transition', 'id'), "
            "COALESCE((SELECT max(id) FROM transition), 0) + 1, false)"
        )
    bind.exec_driver_sql("DELETE FROM meta WHERE key = 'retention.after'")
