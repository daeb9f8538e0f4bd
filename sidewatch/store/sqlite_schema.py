"""A new SQLite store made at once from the schema the migrations leave (`sqlite-schema.sql`:
the statements `sqlite_master` holds after every migration ran), then the version row at their
revision. Running them one by one, and importing Alembic to, was most of the start of
`sidewatch ingest` into a new file; `store.db` calls `create` for a new SQLite store, and
`store.newstore` writes the script again after a new migration (until then, a new store is
migrated as before)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlalchemy import Connection

SCHEMA = Path(__file__).with_name("sqlite-schema.sql")
HEADER = "-- revision: "  # the script's first line, then the revision it is of


def statements(text: str) -> tuple[str | None, list[str]]:
    """(the revision the script is of, its statements) from the text of a schema script."""
    first, _, rest = text.partition("\n")
    revision = first.removeprefix(HEADER).strip() if first.startswith(HEADER) else None
    out: list[str] = []
    pending = ""
    for line in rest.splitlines(keepends=True):
        if not pending and line.startswith("--"):
            continue  # a comment of its own line, between statements
        pending += line
        if sqlite3.complete_statement(pending):
            out.append(pending.strip().removesuffix(";"))
            pending = ""
    if pending.strip():
        raise ValueError(f"{SCHEMA.name}: an incomplete statement at the end")
    return revision, out


def create(conn: Connection, revision: str) -> bool:
    """Makes the store of `conn`, an SQLite database with nothing in it, at `revision` from the
    script, in one transaction, and says so; False (nothing done) when the script is of another
    revision or missing, or the database holds something (another process made it while this
    one waited for the write lock, which the caller then finds at its revision)."""
    try:
        text = SCHEMA.read_text(encoding="utf-8")
    except OSError:  # a copy installed without it: migrated, as before
        return False
    script_revision, script = statements(text)
    if script_revision != revision:
        return False
    # The write lock first: two processes making the same new file take turns.
    conn.exec_driver_sql("BEGIN IMMEDIATE")
    if conn.exec_driver_sql("SELECT count(*) FROM sqlite_master").scalar():
        return False
    for statement in script:
        conn.exec_driver_sql(statement)
    conn.exec_driver_sql("INSERT INTO alembic_version (version_num) VALUES (?)", (revision,))
    return True
