"""`sidewatch`: ingest AG-UI traffic, audit approval waits, validate configs, run the demo."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from functools import wraps
from importlib.resources import files
from pathlib import Path
from typing import Any, TypeVar

import click
import orjson
from sqlalchemy import Engine

from sidewatch import __version__
from sidewatch.config import (
    Config,
    load_config,
    parse_duration,
    read_config_file,
    read_token_files,
)
from sidewatch.daemon.pipeline import audit, ingest_unit, ref_protector, report
from sidewatch.daemon.reports import render, report_name, write_atomic
from sidewatch.errors import ConfigError, SidewatchError, StoreRefused
from sidewatch.ingest.reader import read_file
from sidewatch.report.verdicts import FIRST_MS, audit_json, audit_table
from sidewatch.store.db import Limits, open_store, require_head, revision, upgrade
from sidewatch.store.repo import Store

F = TypeVar("F", bound=Callable[..., Any])

DEMO_AT = "2026-07-26T16:30:00Z"


def _one_line_errors(fn: F) -> F:
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


def _config(config_path: str | None, db: str | None) -> Config:
    data = read_config_file(config_path)
    cfg = load_config(data, os.environ, config_path or "config", read_token_files(data))
    return replace(cfg, db_url=db) if db else cfg


@contextmanager
def _store(cfg: Config, read_only: bool = False) -> Iterator[Engine]:
    """The configured store, closed however the command ends (an error included: a pooled
    PostgreSQL connection would otherwise stay open). A read-only command never changes the
    schema: it refuses a store that is not at the newest migration."""
    engine = open_store(
        cfg.db_url,
        migrate=not read_only,
        busy_timeout_ms=cfg.store_busy_timeout_ms,
        limits=Limits.of(cfg),
    )
    try:
        if read_only:
            require_head(engine)
        yield engine
    finally:
        engine.dispose()


def _parse_at(value: str | None) -> int:
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
    help="YAML config file (see config.example.yaml). Without one, defaults apply.",
)
db_option = click.option(
    "--db",
    default=None,
    metavar="URL",
    help="Store URL, overriding the config and SIDEWATCH_DB_URL "
    "(default sqlite:///./sidewatch.db; postgresql+psycopg://… for PostgreSQL).",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="sidewatch")
def cli() -> None:
    """sidewatch tells apart the ways an AI agent can be waiting for a person.

    A paused agent is silent, and silence is not a health signal. sidewatch reads AG-UI
    interrupt/resume traffic and evidence events, and classifies every approval wait as
    WAITING, STALE, UNROUTABLE, ORPHANED or STUCK_AFTER_DECISION (closed waits:
    CLOSED_BY_DECLINE, RESUMED, CANCELLED), with its owner and next safe move.

    \b
    Try it:   sidewatch demo
    Feed it:  sidewatch ingest traffic.ndjson
    Ask it:   sidewatch audit --open
    """


@cli.command()
@config_option
@db_option
@click.argument("paths", nargs=-1, required=True, type=click.Path(allow_dash=True))
@_one_line_errors
def ingest(config_path: str | None, db: str | None, paths: tuple[str, ...]) -> None:
    """Ingest files of AG-UI traffic and evidence events (- is standard input).

    Each file is one unit: NDJSON, a JSON array, a JSON object or AG-UI SSE text, gzip
    allowed. A unit is stored whole or not at all; ingesting it again changes nothing.
    Bad lines are listed with their line numbers and the rest is still stored.

    A file whose data the store refuses (a value the database cannot hold) is reported on
    one line, nothing of it is stored, and the other files go on.

    Exit status: 0 when no line was rejected, 1 when any was (or any file was refused).
    """
    cfg = _config(config_path, db)
    any_rejected = False
    show_progress = sys.stderr.isatty()
    with _store(cfg) as engine:
        store, protect = Store(engine), ref_protector(engine, cfg)
        for n, path in enumerate(paths, start=1):
            body = read_file(path)
            if show_progress:
                click.echo(f"[{n}/{len(paths)}] {path}: {len(body) / 1e6:.1f} MB …", err=True)
            try:
                summary = ingest_unit(store, path, body, int(time.time() * 1000), protect)
            except StoreRefused as e:  # this file's data, not the store: the next file goes on
                click.echo(
                    f"sidewatch: error: {path}: the store refused its data ({e.reason}); "
                    "nothing of it was stored",
                    err=True,
                )
                any_rejected = True
                continue
            click.echo(
                f"{path}: {summary.accepted} accepted, {summary.skipped} skipped, "
                f"{len(summary.rejects)} rejected"
            )
            for r in summary.rejects:
                click.echo(f"{path}:{r.line}: {r.error}")
            any_rejected = any_rejected or bool(summary.rejects)
    sys.exit(1 if any_rejected else 0)


@cli.command(name="audit")
@config_option
@db_option
@click.option(
    "--at",
    "at",
    default=None,
    metavar="ISO8601",
    help="Evaluation time, e.g. 2026-07-26T16:30:00Z (default: now). Evidence after it is ignored.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="A table for people, or the JSON verdict objects.",
)
@click.option("--open", "only_open", is_flag=True, help="Only waits that are still open.")
@_one_line_errors
def audit_cmd(
    config_path: str | None, db: str | None, at: str | None, fmt: str, only_open: bool
) -> None:
    """Classify every known wait at a time and print the verdicts (read-only)."""
    at_ms = _parse_at(at)
    cfg = _config(config_path, db)
    with _store(cfg, read_only=True) as engine:
        _print_audit(Store(engine), cfg, at_ms, fmt, only_open)


def _print_audit(store: Store, cfg: Config, at_ms: int, fmt: str, only_open: bool) -> None:
    waits = [
        (a.evidence, a.verdict)
        for a in audit(store, cfg.policies, at_ms)
        if not (only_open and a.verdict.closed)
    ]
    if fmt == "json":
        click.echo(orjson.dumps(audit_json(at_ms, waits), option=orjson.OPT_INDENT_2).decode())
    else:
        click.echo(audit_table(at_ms, waits))


@cli.command()
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@_one_line_errors
def demo(fmt: str) -> None:
    """Load the reference six-request scenario into a throw-away store and audit it.

    One request of each kind: a healthy WAITING wait, a STALE one, an UNROUTABLE one, an
    ORPHANED one, one STUCK_AFTER_DECISION and one CLOSED_BY_DECLINE, evaluated at
    2026-07-26T16:30:00Z with the default policy. Needs no set-up and touches no store of yours.
    """
    body = files("sidewatch.cli").joinpath("seed-audit.ndjson").read_bytes()
    with tempfile.TemporaryDirectory(prefix="sidewatch-demo-") as tmp:
        cfg = Config(db_url=f"sqlite:///{Path(tmp) / 'demo.db'}")
        with _store(cfg) as engine:
            store = Store(engine)
            ingest_unit(
                store, "seed-audit.ndjson", body, _parse_at(DEMO_AT), ref_protector(engine, cfg)
            )
            _print_audit(store, cfg, _parse_at(DEMO_AT), fmt, False)


@cli.command()
@config_option
@db_option
@click.option(
    "--listen",
    default=None,
    metavar="HOST:PORT",
    help="Address to serve on (default 127.0.0.1:9477, or server.listen).",
)
@click.option(
    "--no-migrate",
    is_flag=True,
    help="Never change the schema: refuse a store that is not at the newest migration "
    "(for deployments that run `sidewatch db upgrade` as a separate step).",
)
@_one_line_errors
def serve(config_path: str | None, db: str | None, listen: str | None, no_migrate: bool) -> None:
    """Run the daemon: HTTP ingest and read API, /metrics, and the scheduled auditor.

    \b
    POST /v1/events          one ingest unit (NDJSON, JSON, SSE; gzip allowed)
    GET  /v1/waits           verdicts now (?state=S&open=true&limit=N)
    GET  /v1/waits/{id}      one wait with its evidence timeline and transitions
    GET  /metrics            Prometheus metrics
    GET  /healthz, /readyz   liveness and readiness

    Without tokens it listens on loopback only; beyond loopback it serves HTTPS
    (server.tls), or plain HTTP only with server.allowPlaintext. Requests from other
    sites' web pages are refused. SIGTERM drains requests, finishes the running audit
    tick and closes the store.

    Several replicas may share one store (PostgreSQL): all ingest and answer reads, and
    the one holding the audit lease audits (sidewatch_audit_lease_held says which); with
    a `nats` config section, each also consumes the JetStream stream.
    """
    from sidewatch.daemon.serve import serve as run_daemon  # noqa: PLC0415 (load uvicorn only here)

    cfg = _config(config_path, db)
    run_daemon(replace(cfg, listen=listen) if listen else cfg, migrate=not no_migrate)


@cli.command(name="report")
@config_option
@db_option
@click.option(
    "--at", "at", default=None, metavar="ISO8601", help="End of the window (default: now)."
)
@click.option(
    "--window",
    default="24h",
    show_default=True,
    metavar="DURATION",
    help="Length of the window, e.g. 24h, 7d is 168h.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["md", "html", "json"]),
    default="md",
    show_default=True,
    help="Markdown for chat, HTML with charts, JSON for machines.",
)
@click.option(
    "--output",
    default=None,
    type=click.Path(),
    metavar="PATH",
    help="Write here (atomically) instead of standard output; a directory gets "
    "sidewatch-report-YYYY-MM-DD.<format>.",
)
@_one_line_errors
def report_cmd(
    config_path: str | None,
    db: str | None,
    at: str | None,
    window: str,
    fmt: str,
    output: str | None,
) -> None:
    """The audit report of the window ending at --at: counts per state, every problem wait
    with its evidence, owner, next safe move and thresholds, transitions, latency
    percentiles, the longest waits, protocol findings, ingest health, and the change since
    the previous window."""
    try:
        window_ms = parse_duration(window)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--window") from None
    end = _parse_at(at)
    if end - window_ms < FIRST_MS:  # its charts need a calendar date at every tick
        raise click.BadParameter("the window must start after the year 1", param_hint="--at")
    cfg = _config(config_path, db)
    with _store(cfg, read_only=True) as engine:
        body = render(report(Store(engine), cfg.policies, end, window_ms), fmt)
    if output is None:
        click.echo(body.decode(), nl=False)
        return
    path = Path(output)
    if path.is_dir():
        path = path / report_name(end, fmt)
    write_atomic(path, body)
    click.echo(f"wrote {path}", err=True)


@cli.group()
def db() -> None:
    """The store's schema (Alembic migrations)."""


@db.command(name="upgrade")
@config_option
@db_option
@_one_line_errors
def db_upgrade(config_path: str | None, db: str | None) -> None:
    """Apply every migration the store lacks (`serve` and `ingest` also do this on start;
    `audit` and `report` never change the schema)."""
    cfg = _config(config_path, db)
    engine = open_store(cfg.db_url, migrate=False, limits=Limits.of(cfg))
    try:
        before, _ = revision(engine)
        upgrade(engine)
        after, head = revision(engine)
    finally:
        engine.dispose()
    state = "already at" if before == after else f"upgraded from {before or 'empty'} to"
    click.echo(
        f"{engine.url.render_as_string(hide_password=True)}: {state} {after} (newest: {head})"
    )


@cli.command(name="check-config")
@click.argument("path", type=click.Path(dir_okay=False))
@_one_line_errors
def check_config(path: str) -> None:
    """Validate a config file and list every problem at once (exit 1 if any)."""
    data = read_config_file(path)
    cfg = load_config(data, os.environ, path, read_token_files(data))
    names = ", ".join(p.name for p in cfg.policies)
    click.echo(f"{path}: ok ({len(cfg.policies)} policies: {names}; store {cfg.db_url})")


def main() -> None:
    cli(prog_name="sidewatch")
