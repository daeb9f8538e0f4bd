"""A new SQLite store made at once from the schema the migrations leave: the statements
`sqlite_master` holds after every migration ran (`sqlite-schema.sql`), then the version row
at their revision. Running them one by one, and importing Alembic to, was most of the start
of `sidewatch ingest` into a new file. tests/store/test_new_store.py checks that a store made
so is the one the migrations make; after a new migration, `python -m sidewatch.store.newstore`
writes the file again (until then, a new store is migrated as before)."""

from __future__ import annotations

import sqlite3
import sys
import tempfile
from pathlib import Path

from sqlalchemy import Connection

SCHEMA = Path(__file__).with_name("sqlite-schema.sql")
_HEADER = "-- revision: "
_GENERATED = "-- written by `python -m sidewatch.store.newstore` from the migrations: do not edit"

# The statements of the objects the migrations made, tables before what is built on them,
# each in the order it was made. SQLite's own objects (autoindexes of a table's UNIQUE and
# PRIMARY KEY constraints) come with their table's statement.
_DUMP = (
    "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite^_%' "
    "ESCAPE '^' ORDER BY type <> 'table', rowid"
)


def statements(text: str) -> tuple[str | None, list[str]]:
    """(the revision the script is of, its statements) from the text of a schema script."""
    first, _, rest = text.partition("\n")
    revision = first.removeprefix(_HEADER).strip() if first.startswith(_HEADER) else None
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


def dump(conn: Connection) -> list[str]:
    """The statements that make the schema of the SQLite store of `conn` again."""
    return [str(row[0]) for row in conn.exec_driver_sql(_DUMP)]


def write() -> None:
    """Writes `sqlite-schema.sql` from a store that every migration made."""
    from sidewatch.store.db import head, open_store, upgrade  # noqa: PLC0415 (db imports this)

    with tempfile.TemporaryDirectory() as tmp:
        engine = open_store(f"sqlite:///{Path(tmp) / 'schema.db'}", migrate=False)
        try:
            upgrade(engine, replay=True)
            with engine.connect() as conn:
                found = dump(conn)
        finally:
            engine.dispose()
    SCHEMA.write_text(
        f"{_HEADER}{head()}\n{_GENERATED}\n" + "".join(f"{s};\n" for s in found),
        encoding="utf-8",
    )
    print(f"wrote {SCHEMA} ({len(found)} statements)", file=sys.stderr)  # noqa: T201


if __name__ == "__main__":
    write()
