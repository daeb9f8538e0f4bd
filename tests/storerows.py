"""Rows of a real store counted for the tests: the fact tables, each by its row count (the
product never needs them counted)."""

from __future__ import annotations

from sqlalchemy import func, select

from sidewatch.store.models import (
    AnswerRow,
    FindingRow,
    HeartbeatRow,
    InterruptRow,
    LegacyResumeRow,
    RunRow,
    SignalRow,
    ToolCallRow,
    ToolResultRow,
    table_of,
)
from sidewatch.store.repo import Store

FACT_ROWS = (
    InterruptRow,
    ToolCallRow,
    RunRow,
    AnswerRow,
    ToolResultRow,
    LegacyResumeRow,
    SignalRow,
    HeartbeatRow,
    FindingRow,
)


def fact_counts(store: Store) -> dict[str, int]:
    """Rows per fact table, by the table's name."""
    with store.engine.connect() as conn:
        return {
            t.name: int(conn.execute(select(func.count()).select_from(t)).scalar_one())
            for t in map(table_of, FACT_ROWS)
        }
