"""What every command starts from: the `--config` and `--db` options and the config they give,
the store (closed however the command ends; a read-only command creates nothing), the time it
works at, and its errors as one line and exit 1."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from sidewatch.config import Config
from sidewatch.config_schema import load_config, read_config_file, read_token_files
from sidewatch.errors import ConfigError, SidewatchError

if TYPE_CHECKING:
    from sqlalchemy import Engine

F = TypeVar("F", bound=Callable[..., Any])


def one_line_errors(fn: F) -> F:
    """A SidewatchError becomes a one-line message (the config's list, for config errors)
    and exit 1, never a traceback."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ConfigError as e:
            click.echo(f"sidewatch: error: {e}", err=True)  # the list of every problem
            sys.exit(1)
        except SidewatchError as e:
            # One line, even when a driver's message spans several.
            click.echo(f"sidewatch: error: {' '.join(str(e).split())}", err=True)
            sys.exit(1)
        except KeyboardInterrupt:
            click.echo("sidewatch: interrupted; every unit already reported stays stored", err=True)
            sys.exit(130)

    return wrapper  # type: ignore[return-value]


def config_of(config_path: str | None, db: str | None) -> Config:
    """The config of `--config` (defaults without one) and the environment, `--db` over it."""
    data = read_config_file(config_path)
    cfg = load_config(data, os.environ, config_path or "config", read_token_files(data))
    return replace(cfg, db_url=db) if db else cfg


@contextmanager
def opened_store(cfg: Config, read_only: bool = False) -> Iterator[Engine]:
    """The configured store, closed however the command ends (an error included: a pooled
    PostgreSQL connection would otherwise stay open). A read-only command never changes the
    schema and creates nothing: it refuses a store that does not exist, holds no sidewatch
    schema, or is not at the newest migration."""
    from sidewatch.store.db import Limits, open_store, require_head

    if read_only:
        _refuse_missing_file(cfg.db_url)
    engine = open_store(
        cfg.db_url,
        migrate=not read_only,
        busy_timeout_ms=cfg.store_busy_timeout_ms,
        limits=Limits.of(cfg),
    )
    try:
        if read_only:
            _refuse_unmigrated(engine)
            require_head(engine)
        yield engine
    finally:
        engine.dispose()


_CREATE_HINT = "`sidewatch ingest --db URL FILE` or `sidewatch db upgrade --db URL` creates one"


def _refuse_missing_file(url: str) -> None:
    """An SQLite store named by a file that is not there: a typo, not an empty store."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError:
        return  # open_store says what is wrong with it
    database = parsed.database
    if not parsed.drivername.startswith("sqlite") or not database or database == ":memory:":
        return
    if not database.startswith("file:") and not Path(database).exists():
        raise SidewatchError(f"store {url} does not exist (nothing was created); {_CREATE_HINT}")


def _refuse_unmigrated(engine: Engine) -> None:
    """A store that holds no sidewatch schema: another application's database, or an empty
    one. Audited, it would look like an all-clear."""
    from sqlalchemy import inspect

    from sidewatch.store.db import classified

    name = engine.url.render_as_string(hide_password=True)
    with classified(f"store {name} is unavailable", f"store {name} refused a query"):
        tables = set(inspect(engine).get_table_names())
    if not {"alembic_version", "interrupt"} <= tables:
        raise SidewatchError(f"store {name} has no sidewatch schema; {_CREATE_HINT}")


def iso(ms: int) -> str:
    return (
        datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    )


def parse_at(value: str | None) -> int:
    if value is None or value == "now":
        return int(time.time() * 1000)
    try:
        dt = datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not an ISO 8601 time such as 2026-07-26T16:30:00Z", param_hint="--at"
        ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    envvar="SIDEWATCH_CONFIG",
    help="YAML config file (see config.example.yaml; or SIDEWATCH_CONFIG). Without one, "
    "defaults and the environment apply.",
)
db_option = click.option(
    "--db",
    default=None,
    metavar="URL",
    help="Store URL, overriding the config and SIDEWATCH_DB_URL "
    "(default sqlite:///./sidewatch.db; postgresql+psycopg://… for PostgreSQL).",
)
