"""A throw-away PostgreSQL database for a bench run (the running server; dropped afterwards)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

ADMIN = os.environ.get("SIDEWATCH_BENCH_PG", "host=127.0.0.1 port=5432 user=postgres dbname=test")


@contextmanager
def pg_database() -> Iterator[str]:
    """Yields a `postgresql+psycopg://` URL of a new, empty database."""
    params = dict(p.split("=", 1) for p in ADMIN.split())
    name = f"sidewatch_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql+psycopg://{params['user']}@{params['host']}:{params['port']}/{name}"
    finally:
        with psycopg.connect(ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
