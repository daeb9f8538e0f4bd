"""`sidewatch`: ingest AG-UI traffic, audit approval waits, validate configs, run the demo.

A command imports only what it uses (the store, the interpreter, the daemon inside its own
body), so `--help` and `check-config` start in a few tens of milliseconds."""

from __future__ import annotations

import gc
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import click

from sidewatch.cli.assets import dashboard_cmd, rules_cmd
from sidewatch.cli.audit import audit_cmd, demo, report_cmd
from sidewatch.cli.db import db
from sidewatch.cli.health import health
from sidewatch.cli.options import config_of, config_option, db_option, one_line_errors, opened_store
from sidewatch.config import Config, listen_problem
from sidewatch.config_schema import json_schema, load_config, read_config_file, read_token_files
from sidewatch.errors import InputError, StoreRefused, TooLarge

# The heavy imports (SQLAlchemy, Alembic, ag-ui's models, uvicorn) happen inside the commands
# that use them: PLC0415 is waived for cli/ in pyproject.toml.


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
    Feed it:  sidewatch demo --ingest   (the demo's traffic, its times moved to now)
              sidewatch ingest FILE     (examples/traffic.ndjson is dated 26 July 2026)
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


class _Progress:
    """What of a file is committed so far (its lines) and, on a terminal, its progress:
    lines and MB done, at most once a second."""

    def __init__(self, path: str, size: int | None, show: bool) -> None:
        self.path, self.size, self.show = path, size, show
        self.lines = 0
        self.last = time.monotonic()

    def __call__(self, lines: int, read: int) -> None:
        self.lines = lines
        now = time.monotonic()
        if not self.show or now - self.last < 1:
            return
        self.last = now
        of = "" if not self.size else f" of {self.size / 1e6:.1f} ({read / self.size:.0%})"
        click.echo(f"  {self.path}: {lines} lines, {read / 1e6:.1f} MB{of} …", err=True)


def _size(path: str) -> int | None:
    try:
        return os.path.getsize(path)
    except OSError:
        return None  # a missing file is told by its reading


def _what_stored(lines: int) -> str:
    """What of a file was stored when it failed part-way."""
    if not lines:
        return "nothing of it was stored"
    return f"its first {lines} lines were stored: ingest it again to store the rest"


@cli.command()
@config_option
@db_option
@click.argument("paths", nargs=-1, required=True, type=click.Path(allow_dash=True))
@one_line_errors
def ingest(config_path: str | None, db: str | None, paths: tuple[str, ...]) -> None:
    """Ingest files of AG-UI traffic and evidence events (- is standard input).

    A file of NDJSON lines (gzip allowed) may be of any size: it is read as a stream
    and committed a unit of up to server.maxLinesPerUnit lines (at most 50000) at a time,
    each cut after a run's end. A file cut short, or stopped part-way, is completed by
    ingesting it again: what was stored is not stored twice. Any other form (a JSON
    array, a JSON object, AG-UI SSE text) is one unit, held to the limits a request body
    is (server.maxInflatedBytes, server.maxLinesPerUnit). Lines over server.maxLineBytes
    are rejected. Bad lines are listed with their line numbers (a file's first 1000; the rest are
    counted, and every one is kept in the store) and the rest is stored.

    A file over a limit, or whose data the store refuses (a value the database cannot
    hold), is reported on one line with what of it was stored, and the other files go on.

    Exit status: 0 when no line was rejected, 1 when any was (or any file was refused).
    """
    from sidewatch.app.ingest import Ingest, ref_protector
    from sidewatch.store.repo import Store

    cfg = config_of(config_path, db)
    any_rejected = False
    show_progress = sys.stderr.isatty()
    with opened_store(cfg) as engine:
        store = Store(engine, cfg.heartbeat_gap_ms)
        ingest = Ingest(store, ref_protector(engine, cfg), cfg)
        for n, path in enumerate(paths, start=1):
            size = None if path == "-" or not show_progress else _size(path)
            done = _Progress(path, size, show_progress)
            if show_progress:
                where = "" if size is None else f": {size / 1e6:.1f} MB"
                click.echo(f"[{n}/{len(paths)}] {path}{where} …", err=True)
            try:
                with _few_collections():
                    summary = ingest.file(path, int(time.time() * 1000), done)
            except InputError as e:  # this file, not the store: the next file goes on
                if not isinstance(e, TooLarge | StoreRefused) and not done.lines:
                    raise  # unreadable from its start, as before
                why = (
                    f"the store refused its data ({e.reason})"
                    if isinstance(e, StoreRefused)
                    else str(e).removeprefix(f"{path}: ")
                )
                click.echo(f"sidewatch: error: {path}: {why}; {_what_stored(done.lines)}", err=True)
                any_rejected = True
                continue
            click.echo(
                f"{path}: {summary.accepted} accepted, {summary.skipped} skipped, "
                f"{summary.rejected} rejected"
            )
            for r in summary.rejects:
                click.echo(f"{path}:{r.line}: {r.error}")
            if summary.more_rejected:
                click.echo(
                    f"{path}: {summary.more_rejected} more rejected lines not shown (the "
                    f"first {len(summary.rejects)} are; the store's reject table holds each "
                    "one's unit, line and reason)"
                )
            any_rejected = any_rejected or bool(summary.rejected)
        # The files are one stream: what their runs hold for an end none of them brought is
        # closed now (this process's memory of it ends with the command).
        ingest.close_held("sidewatch ingest", int(time.time() * 1000))
    sys.exit(1 if any_rejected else 0)


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
@one_line_errors
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

    cfg = config_of(config_path, db)
    level = {"debug": 10, "info": 20, "warning": 30, "error": 40}[log_level]

    def reread() -> Config:  # at SIGHUP: the file again, with the same command-line overrides
        again = config_of(config_path, db)
        return replace(again, listen=listen) if listen else again

    run_daemon(
        replace(cfg, listen=listen) if listen else cfg,
        level,
        access_log,
        migrate=not no_migrate,
        reread=reread,
        config_path=config_path,
    )


@cli.command(name="check-config")
@click.argument("path", type=click.Path(dir_okay=False), required=False)
@click.option(
    "--schema",
    is_flag=True,
    help="Print the JSON Schema (draft 2020-12) of a config file instead, for editors.",
)
@one_line_errors
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


for command in (audit_cmd, demo, report_cmd, db, health, rules_cmd, dashboard_cmd):
    cli.add_command(command)


def main() -> None:
    cli(prog_name="sidewatch")
