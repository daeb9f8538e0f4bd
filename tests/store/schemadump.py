"""Dumps the schema `alembic upgrade head` makes from a directory of migration files, on a new
SQLite file and on a throw-away PostgreSQL database, to compare two chains: the pre-release
revisions against the 0.1.0 baseline they were squashed into, or the baseline before and after
a revision is folded into it (docs/internals/store.md, "Migrations").

    python tests/store/schemadump.py VERSIONS_DIR OUT   # writes OUT.sqlite.txt and OUT.pg.txt

Run from the repository root (it uses this tree's migrations/env.py). SQLite: every
`sqlite_master` statement (whitespace and the quotes of a table name batch mode rebuilt made
alike), each table's columns, indexes (by name) and foreign keys. PostgreSQL:
`pg_dump --schema-only`. Both: every row of every table (the version row among them). Two
chains make the same schema when the dumps differ in the `ROW alembic_version` line only.
PostgreSQL: SIDEWATCH_TEST_PG (libpq parameters, as the tests), by default the local server.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config

MIGRATIONS = Path("sidewatch/store/migrations").resolve()
PG = dict(
    p.split("=", 1)
    for p in os.environ.get(
        "SIDEWATCH_TEST_PG", "host=127.0.0.1 port=5432 user=postgres dbname=test"
    ).split()
)


def migrate(url: str, location: Path) -> sa.Engine:
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        cfg = Config()
        cfg.set_main_option("script_location", str(location))
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")
    return engine


def rows(engine: sa.Engine, tables: list[str]) -> list[str]:
    with engine.connect() as conn:
        return [
            f"ROW {t}: {tuple(r)}"
            for t in sorted(tables)
            for r in conn.execute(sa.text(f'SELECT * FROM "{t}"')).all()
        ]


def _norm(sql: str | None) -> str:
    text = re.sub(r"\s+", " ", sql or "").replace("( ", "(").replace(" )", ")").strip()
    return re.sub(r'^CREATE TABLE "(\w+)"', r"CREATE TABLE \1", text)


def sqlite_dump(location: Path, tmp: Path) -> str:
    engine = migrate(f"sqlite:///{tmp / 'schema.db'}", location)
    with engine.connect() as conn:
        objs = conn.exec_driver_sql(
            "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
        ).all()
        tables = [o[1] for o in objs if o[0] == "table" and not o[1].startswith("sqlite_")]
        details = []
        for t in tables:
            details += [
                f"COL {t}: {tuple(c)}" for c in conn.exec_driver_sql(f'PRAGMA table_xinfo("{t}")')
            ]
            details += [
                f"FK {t}: {tuple(k)}"
                for k in conn.exec_driver_sql(f'PRAGMA foreign_key_list("{t}")')
            ]
            for ix in conn.exec_driver_sql(f'PRAGMA index_list("{t}")').all():
                cols = [tuple(c) for c in conn.exec_driver_sql(f'PRAGMA index_xinfo("{ix[1]}")')]
                details.append(f"IX {t}: {tuple(ix)[1:]} {cols}")  # not its place: creation order
    lines = [f"{o[0]} {o[1]} on {o[2]}: {_norm(o[3])}" for o in objs]
    out = lines + sorted(details) + rows(engine, tables)
    engine.dispose()
    return "\n".join(out) + "\n"


def pg_dump(location: Path) -> str:
    base = f"postgresql+psycopg://{PG['user']}@{PG['host']}:{PG['port']}"
    name = f"schemadump_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(f"{base}/{PG['dbname']}", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    try:
        engine = migrate(f"{base}/{name}", location)
        with engine.connect() as conn:
            tables = [
                str(r[0])
                for r in conn.exec_driver_sql(
                    "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
                )
            ]
        data = rows(engine, tables)
        engine.dispose()
        argv = ["pg_dump", "--schema-only", "--no-owner", "-h", PG["host"], "-p", PG["port"]]
        dump = subprocess.run(
            [*argv, "-U", PG["user"], name], check=True, capture_output=True, text=True
        ).stdout
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE {name} WITH (FORCE)")
        admin.dispose()
    # Comments, blank lines and pg_dump's per-run \restrict keys are not the schema.
    kept = [x for x in dump.splitlines() if x.strip() and not x.startswith(("--", "\\"))]
    return "\n".join(kept + data) + "\n"


def main() -> None:
    versions, out = Path(sys.argv[1]), sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        location = tmp / "migrations"
        skip = shutil.ignore_patterns("versions", "__pycache__")
        shutil.copytree(MIGRATIONS, location, ignore=skip)
        shutil.copytree(
            versions, location / "versions", ignore=shutil.ignore_patterns("__pycache__")
        )
        Path(f"{out}.sqlite.txt").write_text(sqlite_dump(location, tmp))
        Path(f"{out}.pg.txt").write_text(pg_dump(location))
    print(f"wrote {out}.sqlite.txt and {out}.pg.txt")  # noqa: T201


if __name__ == "__main__":
    main()
