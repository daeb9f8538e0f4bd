"""heartbeats compacted: each run of beats of one thread, run and handle, no two consecutive
ones further apart than the compaction gap, becomes one span row (first and last beat, count)

The gap comes from the config that runs the upgrade (`heartbeat_gap_ms`: store.heartbeatCompaction,
never more than any policy's heartbeatFreshness); without one (0) only beats of the same
thread, run, handle and time become one row. A span is never drawn across a beat of the other
handle, so the verdicts of the store are the same before and after.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01 19:30:00.000000
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import context, op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

BATCH = 5_000
_COLUMNS = ("thread_id", "run_id", "handle", "at", "seq", "last_at", "last_seq", "beats")


def _create(name: str, spans: bool) -> None:
    extra = (
        [
            sa.Column("last_at", sa.BigInteger(), nullable=False),
            sa.Column("last_seq", sa.BigInteger(), nullable=False),
            sa.Column("beats", sa.Integer(), nullable=False),
        ]
        if spans
        else [sa.Column("key", sa.String(length=64), nullable=False)]
    )
    op.create_table(
        name,
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("thread_id", sa.String(length=256), nullable=False),
        sa.Column("run_id", sa.String(length=256), nullable=True),
        sa.Column("handle", sa.Boolean(), nullable=True),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        *extra,
        sa.PrimaryKeyConstraint("id"),
        *([] if spans else [sa.UniqueConstraint("key")]),
    )


class _Spans:
    """The spans of one thread's beats, fed in (at, seq) order."""

    def __init__(self, gap: int) -> None:
        self.gap = gap
        self.open: dict[tuple[Any, Any], list[int]] = {}  # (run, handle) -> its latest span
        self.latest: dict[bool, int] = {}  # handle -> the time of its latest beat
        self.done: list[tuple[Any, ...]] = []

    def beat(self, thread: str, run: Any, handle: Any, at: int, seq: int) -> None:
        handle = None if handle is None else bool(handle)  # SQLite answers 0/1
        k = (run, handle)
        s = self.open.get(k)
        other = None if handle is None else self.latest.get(not handle)
        if s is not None and at <= s[2]:
            pass  # the same beat again (an untimed one of the same ms)
        elif (
            s is not None and at - s[2] <= self.gap and (other is None or other < s[2])
        ):  # nothing of the other handle between: the same span
            s[2], s[3], s[4] = at, seq, s[4] + 1
        else:
            if s is not None:
                self.done.append((thread, *k, *s))
            self.open[k] = [at, seq, at, seq, 1]
        if handle is not None:
            self.latest[handle] = at

    def close(self, thread: str) -> list[tuple[Any, ...]]:
        out = self.done + [(thread, *k, *s) for k, s in self.open.items()]
        return [(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]) for r in out]


def upgrade() -> None:
    gap = int(context.config.attributes.get("heartbeat_gap_ms", 0))
    conn = op.get_bind()
    _create("heartbeat_span", spans=True)
    cols = ", ".join(_COLUMNS)
    insert = sa.text(
        f"INSERT INTO heartbeat_span ({cols}) VALUES "  # noqa: S608 (our own names)
        f"({', '.join(':' + c for c in _COLUMNS)})"
    )
    rows = conn.execute(
        sa.text(
            "SELECT thread_id, run_id, handle, at, seq FROM heartbeat ORDER BY thread_id, at, seq"
        )
    )
    thread: str | None = None
    spans = _Spans(gap)
    out: list[tuple[Any, ...]] = []

    def flush(force: bool) -> None:
        if out and (force or len(out) >= BATCH):
            conn.execute(insert, [dict(zip(_COLUMNS, r, strict=True)) for r in out])
            out.clear()

    for t, run, handle, at, seq in rows.yield_per(BATCH):
        if t != thread:
            if thread is not None:
                out.extend(spans.close(thread))
                flush(False)
            thread, spans = t, _Spans(gap)
        spans.beat(t, run, handle, int(at), int(seq))
    if thread is not None:
        out.extend(spans.close(thread))
    flush(True)
    op.drop_table("heartbeat")
    op.rename_table("heartbeat_span", "heartbeat")
    op.create_index("ix_heartbeat_thread_id", "heartbeat", ["thread_id"])
    op.create_index("ix_heartbeat_thread_at", "heartbeat", ["thread_id", "at"])  # of 0013


def downgrade() -> None:
    # A span stands for beats whose times are gone: only one-beat spans can be given back.
    spans = op.get_bind().execute(sa.text("SELECT count(*) FROM heartbeat WHERE beats > 1"))
    if spans.scalar():
        raise RuntimeError(
            "heartbeat holds compacted spans of beats: downgrading below 0014 would lose the "
            "beats between their first and last; not downgraded"
        )
    _create("heartbeat_beat", spans=False)
    op.execute(
        "INSERT INTO heartbeat_beat (thread_id, run_id, handle, at, seq, key) "
        "SELECT thread_id, run_id, handle, at, seq, 'migrated:' || CAST(id AS VARCHAR(20)) "
        "FROM heartbeat"
    )
    op.drop_table("heartbeat")
    op.rename_table("heartbeat_beat", "heartbeat")
    op.create_index("ix_heartbeat_thread_id", "heartbeat", ["thread_id"])
    op.create_index("ix_heartbeat_thread_at", "heartbeat", ["thread_id", "at"])  # of 0013
