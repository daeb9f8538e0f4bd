"""Shared fixtures. A test that takes `db_url` runs on embedded SQLite and on the running
PostgreSQL server (a throw-away database per test session; never a mock). A PostgreSQL server
that cannot be reached fails these tests; it never skips them.

`db_url` is a store that holds no data: a new SQLite file, or a PostgreSQL schema of the
session's database, migrated when first made and emptied after each test that used it (a new
schema costs ~0.2 s of migration DDL a test, emptying one ~0.01 s). `blank_db_url` is a store
without even its tables, for the tests of the migrations; `module_db_url` is one store for a
whole module."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from hypothesis import settings
from sqlalchemy import Engine

from sidewatch.store.db import open_store
from sidewatch.store.models import metadata
from sidewatch.store.repo import Store

# CI runs every property test on fixed examples, so that a submission's result is reproducible;
# locally they explore new random examples on every run.
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

PG_ADMIN = os.environ.get("SIDEWATCH_TEST_PG", "host=127.0.0.1 port=5432 user=postgres dbname=test")
_PARAMS = dict(p.split("=", 1) for p in PG_ADMIN.split())
STORES = ["sqlite", "postgresql"]


class PgSchemas:
    """Schemas of the session's database, each lent to one test at a time. Each store URL
    names its schema as the connections' application_name too, so that a schema some
    connection is still using (a transaction left open, a daemon that did not stop) is seen
    and never lent again."""

    def __init__(self, database: str) -> None:
        self.database = database
        self.free: list[str] = []

    def _connect(self) -> psycopg.Connection[tuple[object, ...]]:
        conninfo = f"host={_PARAMS['host']} port={_PARAMS['port']} user={_PARAMS['user']}"
        return psycopg.connect(f"{conninfo} dbname={self.database}", autocommit=True)

    def url(self, schema: str) -> str:
        return (
            f"postgresql+psycopg://{_PARAMS['user']}@{_PARAMS['host']}:{_PARAMS['port']}/"
            f"{self.database}?options=-csearch_path%3D{schema}&application_name={schema}"
        )

    def blank(self) -> str:
        schema = f"s_{uuid.uuid4().hex[:12]}"
        with self._connect() as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        return schema

    def lend(self) -> str:
        if self.free:
            return self.free.pop()
        schema = self.blank()
        open_store(self.url(schema)).dispose()
        return schema

    def give_back(self, schema: str) -> None:
        """Empty the schema (its migration stays) for the next test."""
        with self._connect() as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE application_name = %s AND state <> 'idle'",
                (schema,),
            ).fetchone()
            if row is None or row[0]:
                return  # still in use: left to the database's drop at the end of the session
            # DELETE, not TRUNCATE: on a few rows it is ten times faster.
            with conn.transaction():
                for table in reversed(metadata.sorted_tables):
                    conn.execute(f'DELETE FROM "{schema}"."{table.name}"')
                conn.execute(
                    "SELECT setval(format('%%I.%%I', schemaname, sequencename)::regclass, 1, "
                    "false) FROM pg_sequences WHERE schemaname = %s",
                    (schema,),
                )
        self.free.append(schema)


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    name = f"sidewatch_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield name
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def pg_schemas(pg_database: str) -> PgSchemas:
    return PgSchemas(pg_database)


def _lent(request: pytest.FixtureRequest, sqlite_dir: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{sqlite_dir / 'sidewatch.db'}"
        return
    schemas: PgSchemas = request.getfixturevalue("pg_schemas")
    schema = schemas.lend()
    yield schemas.url(schema)
    schemas.give_back(schema)


@pytest.fixture(params=STORES)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from _lent(request, tmp_path)


@pytest.fixture(scope="module", params=STORES)
def module_db_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    yield from _lent(request, tmp_path_factory.mktemp("store"))


@pytest.fixture(params=STORES)
def blank_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'sidewatch.db'}"
    schemas: PgSchemas = request.getfixturevalue("pg_schemas")
    return schemas.url(schemas.blank())


@pytest.fixture
def pg_url(pg_schemas: PgSchemas) -> Iterator[str]:
    """A store on the running PostgreSQL server only, for what only PostgreSQL does."""
    schema = pg_schemas.lend()
    yield pg_schemas.url(schema)
    pg_schemas.give_back(schema)


@pytest.fixture
def open_stores(db_url: str) -> Iterator[Callable[[], Store]]:
    """Opens the test's store as often as a test restarts; every engine closed at the end."""
    engines: list[Engine] = []

    def opener() -> Store:
        engines.append(open_store(db_url))
        return Store(engines[-1])

    yield opener
    for engine in engines:
        engine.dispose()
