"""`sidewatch`: ingest AG-UI traffic, audit approval waits, validate configs, run the demo.

A command imports only what it uses (the store, the interpreter, the daemon inside its own
body), so `--help` and `check-config` start in a few tens of milliseconds."""

from __future__ import annotations

import gc
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
from typing import TYPE_CHECKING, Any, TypeVar

import click

from sidewatch.config import (
    Config,
    listen_problem,
    load_config,
    parse_duration,
    read_config_file,
    read_token_files,
)
from sidewatch.errors import ConfigError, SidewatchError, StoreRefused, TooLarge

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from sidewatch.store.repo import Store

# The heavy imports (SQLAlchemy, Alembic, ag-ui's models, uvicorn) happen inside the commands
# that use them: PLC0415 is waived for this module in pyproject.toml.

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
        heartbeat_gap_ms=cfg.heartbeat_gap_ms,
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


def _parse_window(value: str) -> int:
    """A window's length: a duration with its unit (a bare `24` would be read as seconds,
    rarely what was meant), longer than nothing."""
    if value.strip().isdigit() and int(value) != 0:
        raise click.BadParameter(
            f"{value!r} has no unit: say {value.strip()}h, {value.strip()}m or {value.strip()}s",
            param_hint="--window",
        )
    try:
        window_ms = parse_duration(value)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--window") from None
    if window_ms <= 0:
        raise click.BadParameter(f"{value!r} is an empty window", param_hint="--window")
    return window_ms


def _iso(ms: int) -> str:
    return (
        datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    )


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


def _show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """click's version option, reading the version only when asked (see sidewatch.__init__)."""
    if not value or ctx.resilient_parsing:
        return
    from sidewatch import __version__

    click.echo(f"sidewatch, version {__version__}")
    ctx.exit()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_show_version,
    help="Show the version and exit.",
)
def cli() -> None:
    """sidewatch tells apart the ways an AI agent can be waiting for a person.

    A paused agent is silent, and silence is not a health signal. sidewatch reads AG-UI
    interrupt/resume traffic and evidence events, and classifies every approval wait as
    WAITING, STALE, UNROUTABLE, ORPHANED or STUCK_AFTER_DECISION (closed waits:
    CLOSED_BY_DECLINE, RESUMED, CANCELLED), with its owner and next safe move.

    \b
    Try it:   sidewatch demo
    Feed it:  sidewatch ingest examples/traffic.ndjson
    Ask it:   sidewatch audit --open
    """


# The garbage collector's thresholds while a file is read: a collection every this many new
# objects, and older generations rarely.
INGEST_GC_THRESHOLD = (100_000, 50, 100)


@contextmanager
def _few_collections() -> Iterator[None]:
    """Reading a file allocates a dict for each parsed line and keeps the unit's facts until
    they are stored; at the default thresholds (a collection every 700 objects) the collector
    scans them again and again, about a sixth of a large file's CPU. What is loaded so far is
    frozen out of its scans and it runs far less often; cycles are still collected."""
    before = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(*INGEST_GC_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


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

    A file is held to the limits a request body is (server.maxInflatedBytes,
    server.maxLinesPerUnit, server.maxLineBytes). A file over them, or whose data the
    store refuses (a value the database cannot hold), is reported on one line, nothing
    of it is stored, and the other files go on.

    Exit status: 0 when no line was rejected, 1 when any was (or any file was refused).
    """
    from sidewatch.app.ingest import Ingest, ref_protector
    from sidewatch.store.repo import Store

    cfg = _config(config_path, db)
    any_rejected = False
    show_progress = sys.stderr.isatty()
    with _store(cfg) as engine:
        store = Store(engine, cfg.heartbeat_gap_ms)
        ingest = Ingest(store, ref_protector(engine, cfg), cfg)
        for n, path in enumerate(paths, start=1):
            if show_progress:
                size = "" if path == "-" else f": {os.path.getsize(path) / 1e6:.1f} MB"
                click.echo(f"[{n}/{len(paths)}] {path}{size} …", err=True)
            try:
                with _few_collections():
                    summary = ingest.file(path, int(time.time() * 1000))
            except TooLarge as e:  # this file, not the store: the next file goes on
                click.echo(f"sidewatch: error: {e}; nothing of it was stored", err=True)
                any_rejected = True
                continue
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
    from sidewatch.store.repo import Store

    at_ms = _parse_at(at)
    cfg = _config(config_path, db)
    with _store(cfg, read_only=True) as engine:
        _print_audit(Store(engine), cfg, at_ms, fmt, only_open)


def _print_audit(store: Store, cfg: Config, at_ms: int, fmt: str, only_open: bool) -> None:
    import orjson

    from sidewatch.app.audit import audit
    from sidewatch.report.verdicts import audit_json, audit_table

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
    from sidewatch.app.ingest import Ingest, ref_protector
    from sidewatch.store.repo import Store

    body = files("sidewatch.cli").joinpath("seed-audit.ndjson").read_bytes()
    with tempfile.TemporaryDirectory(prefix="sidewatch-demo-") as tmp:
        cfg = Config(db_url=f"sqlite:///{Path(tmp) / 'demo.db'}")
        with _store(cfg) as engine:
            store = Store(engine)
            ingest = Ingest(store, ref_protector(engine, cfg), cfg)
            ingest.body("seed-audit.ndjson", body, _parse_at(DEMO_AT))
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
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
    help="The least severe log records written (JSON lines on standard error).",
)
@click.option(
    "--access-log",
    is_flag=True,
    help="Also log one line per HTTP request (client, method, path, status); off by default.",
)
@click.option(
    "--no-migrate",
    is_flag=True,
    help="Never change the schema: refuse a store that is not at the newest migration "
    "(for deployments that run `sidewatch db upgrade` as a separate step).",
)
@_one_line_errors
def serve(
    config_path: str | None,
    db: str | None,
    listen: str | None,
    log_level: str,
    access_log: bool,
    no_migrate: bool,
) -> None:
    """Run the daemon: HTTP ingest and read API, /metrics, and the scheduled auditor.

    \b
    POST /v1/events          one ingest unit (NDJSON, JSON, SSE; gzip allowed)
    GET  /v1/waits           verdicts now (?state=S&open=true&limit=N)
    GET  /v1/waits/{id}      one wait with its evidence timeline and transitions
    GET  /metrics            Prometheus metrics
    GET  /healthz, /readyz   liveness and readiness
    GET  /ui/waits[/{id}]    the wait pages for on-call (read token; /ui/login signs in)
    GET  /runbooks/{name}    the runbooks the alerts link to

    Without tokens it listens on loopback only; beyond loopback it serves HTTPS
    (server.tls), or plain HTTP only with server.allowPlaintext. Requests from other
    sites' web pages are refused. SIGTERM drains requests, finishes the running audit
    tick and closes the store. SIGHUP reloads the config file: policies, tokens, body
    limits and report settings change at once; a changed key that needs a restart is
    logged and keeps its old value, and a file with problems changes nothing.

    Several replicas may share one store (PostgreSQL): all ingest and answer reads, and
    the one holding the audit lease audits (sidewatch_audit_lease_held says which); with
    a `nats` config section, each also consumes the JetStream stream.
    """
    if listen is not None and (problem := listen_problem(listen)) is not None:
        raise click.BadParameter(f"{listen!r}: {problem}", param_hint="--listen")
    from sidewatch.daemon.serve import serve as run_daemon

    cfg = _config(config_path, db)
    level = {"debug": 10, "info": 20, "warning": 30, "error": 40}[log_level]

    def reread() -> Config:  # at SIGHUP: the file again, with the same command-line overrides
        again = _config(config_path, db)
        return replace(again, listen=listen) if listen else again

    run_daemon(
        replace(cfg, listen=listen) if listen else cfg,
        level,
        access_log,
        migrate=not no_migrate,
        reread=reread,
    )


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
    help="Length of the window, with its unit: 24h, 7d, 90m (a bare number is refused).",
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
    from sidewatch.app.report import render, report, report_name, write_atomic
    from sidewatch.report.verdicts import FIRST_MS
    from sidewatch.store.repo import Store

    window_ms = _parse_window(window)
    end = _parse_at(at)
    if end - window_ms < FIRST_MS:  # its charts need a calendar date at every tick
        hint = "--at" if end - FIRST_MS < 86_400_000 else "--window"
        raise click.BadParameter(
            f"the window must start after the year 1 ({window} before {_iso(end)} does not)",
            param_hint=hint,
        )
    cfg = _config(config_path, db)
    with _store(cfg, read_only=True) as engine:
        body = render(report(Store(engine), cfg.policies, end, window_ms), fmt, cfg.external_url)
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
    from sidewatch.store.db import Limits, open_store, revision, upgrade

    cfg = _config(config_path, db)
    engine = open_store(cfg.db_url, migrate=False, limits=Limits.of(cfg))
    try:
        before, _ = revision(engine)
        upgrade(engine, cfg.heartbeat_gap_ms)
        after, head = revision(engine)
    finally:
        engine.dispose()
    state = "already at" if before == after else f"upgraded from {before or 'empty'} to"
    click.echo(
        f"{engine.url.render_as_string(hide_password=True)}: {state} {after} (newest: {head})"
    )


@db.command(name="stats")
@config_option
@db_option
@_one_line_errors
def db_stats(config_path: str | None, db: str | None) -> None:
    """Rows per table, the oldest row of each, and the store's size on disk: to watch it grow
    (and `store.retention` keep it in bounds). Read-only."""
    from sidewatch.store.db import revision
    from sidewatch.store.models import metadata
    from sidewatch.store.retention import store_stats

    cfg = _config(config_path, db)
    with _store(cfg, read_only=True) as engine:
        current, _ = revision(engine)
        stats = store_stats(engine, [t.name for t in metadata.sorted_tables])
    click.echo(f"{engine.url.render_as_string(hide_password=True)} (schema {current})")
    width = max(len(t.name) for t in stats.tables)
    click.echo(f"{'table':<{width}}  {'rows':>12}  oldest")
    for t in stats.tables:
        oldest = "-" if t.oldest is None else _iso(t.oldest)
        click.echo(f"{t.name:<{width}}  {t.rows:>12,}  {oldest}")
    size = f"size on disk: {_mb(stats.size_bytes)}"
    if stats.free_bytes is not None:
        size += f" ({_mb(stats.free_bytes)} free inside; auto_vacuum {stats.auto_vacuum})"
    click.echo(size)
    pruned = ", ".join(f"{n:,} {k.replace('_', ' ')}" for k, n in stats.pruned.items())
    retention = _duration(cfg.store_retention_ms)
    click.echo(f"retention {retention}; pruned so far (kept as counts): {pruned or 'nothing'}")


def _mb(n: int) -> str:
    return f"{n / 1_000_000:,.1f} MB"


def _duration(ms: int) -> str:
    days, rest = divmod(ms, 86_400_000)
    return f"{days}d" if not rest else f"{ms // 3_600_000}h" if not ms % 3_600_000 else f"{ms}ms"


@cli.command(name="check-config")
@click.argument("path", type=click.Path(dir_okay=False), required=False)
@click.option(
    "--schema",
    is_flag=True,
    help="Print the JSON Schema (draft 2020-12) of a config file instead, for editors.",
)
@_one_line_errors
def check_config(path: str | None, schema: bool) -> None:
    """Validate a config file and list every problem at once (exit 1 if any).

    It runs the checks `serve` runs before it starts (the cron of reports.schedule, the
    listen address, tokens and TLS files): only whether the port is free is left to serve.

    With --schema it prints the JSON Schema of config.yaml instead: an editor that reads
    it (e.g. `# yaml-language-server: $schema=sidewatch.schema.json`) flags a mistyped key
    as you type."""
    if schema == (path is not None):
        raise click.UsageError("give a config file to check, or --schema (not both)")
    if path is None:
        import json

        from sidewatch.config_schema import json_schema

        click.echo(json.dumps(json_schema(), indent=2))
        return
    from sidewatch.daemon.listen import check_listen

    data = read_config_file(path)
    cfg = load_config(data, os.environ, path, read_token_files(data))
    check_listen(cfg)
    names = ", ".join(p.name for p in cfg.policies)
    store = _safe_url(cfg.db_url)
    click.echo(f"{path}: ok ({len(cfg.policies)} policies: {names}; store {store})")


def _safe_url(url: str) -> str:
    """A store URL without its password (SQLAlchemy's own masking; a URL without `@` has
    none, and then SQLAlchemy is not loaded for it)."""
    if "@" not in url:
        return url
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


def main() -> None:
    cli(prog_name="sidewatch")
