"""Writes `sqlite-schema.sql` (see `store.sqlite_schema`) again from the migrations, after a
new one: `python -m sidewatch.store.newstore` runs every migration on a throw-away SQLite store
and dumps its schema. tests/store/test_new_store.py checks that a store made from the script is
the one the migrations make."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from sqlalchemy import Connection

from sidewatch.store.db import head, open_store, upgrade
from sidewatch.store.sqlite_schema import HEADER, SCHEMA

_GENERATED = "-- written by `python -m sidewatch.store.newstore` from the migrations: do not edit"

# The statements of the objects the migrations made, tables before what is built on them,
# each in the order it was made. SQLite's own objects (autoindexes of a table's UNIQUE and
# PRIMARY KEY constraints) come with their table's statement.
_DUMP = (
    "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite^_%' "
    "ESCAPE '^' ORDER BY type <> 'table', rowid"
)


def dump(conn: Connection) -> list[str]:
    """The statements that make the schema of the SQLite store of `conn` again."""
    return [str(row[0]) for row in conn.exec_driver_sql(_DUMP)]


def write() -> None:
    """Writes `sqlite-schema.sql` from a store that every migration made."""
    with tempfile.TemporaryDirectory() as tmp:
        engine = open_store(f"sqlite:///{Path(tmp) / 'schema.db'}", migrate=False)
        try:
            upgrade(engine, replay=True)
            with engine.connect() as conn:
                found = dump(conn)
        finally:
            engine.dispose()
    SCHEMA.write_text(
        f"{HEADER}{head()}\n{_GENERATED}\n" + "".join(f"{s};\n" for s in found),
        encoding="utf-8",
    )
    print(f"wrote {SCHEMA} ({len(found)} statements)", file=sys.stderr)  # noqa: T201


if __name__ == "__main__":
    write()
