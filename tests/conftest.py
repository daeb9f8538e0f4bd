"""Shared fixtures. A test that takes `db_url` runs on embedded SQLite and on the running
PostgreSQL server (a throw-away database per test session, a fresh schema per test; never a
mock). A PostgreSQL server that cannot be reached fails these tests; it never skips them."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from hypothesis import settings

# CI runs every property test on fixed examples, so that a submission's result is reproducible;
# locally they explore new random examples on every run.
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

PG_ADMIN = os.environ.get("SIDEWATCH_TEST_PG", "host=127.0.0.1 port=5432 user=postgres dbname=test")
_PARAMS = dict(p.split("=", 1) for p in PG_ADMIN.split())


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    name = f"sidewatch_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield name
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'sidewatch.db'}"
    return _pg_schema(request.getfixturevalue("pg_database"))


@pytest.fixture
def pg_url(pg_database: str) -> str:
    """A fresh schema on the running PostgreSQL server, for what only PostgreSQL can do."""
    return _pg_schema(pg_database)


def _pg_schema(database: str) -> str:
    schema = f"s_{uuid.uuid4().hex[:12]}"
    conninfo = f"host={_PARAMS['host']} port={_PARAMS['port']} user={_PARAMS['user']}"
    with psycopg.connect(f"{conninfo} dbname={database}", autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    return (
        f"postgresql+psycopg://{_PARAMS['user']}@{_PARAMS['host']}:{_PARAMS['port']}/"
        f"{database}?options=-csearch_path%3D{schema}"
    )
