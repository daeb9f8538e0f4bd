"""`audit`, `demo` and `report`: the commands that read verdicts from a store (the demo's a
throw-away one) and print them, as a table, JSON or the report of a window."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from datetime import datetime, timedelta
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from sidewatch.cli.options import (
    config_of,
    config_option,
    db_option,
    iso,
    one_line_errors,
    opened_store,
    parse_at,
)
from sidewatch.config import Config, parse_duration

if TYPE_CHECKING:
    from sidewatch.store.repo import Store

DEMO_AT = "2026-07-26T16:30:00Z"


F = TypeVar("F", bound=Callable[..., Any])


def verdicts_format(text: str) -> Callable[[F], F]:
    """The `--format table|json` option of a command printing verdicts, with its help."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(["table", "json"]),
        default="table",
        show_default=True,
        help=text,
    )


@click.command(name="audit")
@config_option
@db_option
@click.option(
    "--at",
    "at",
    default=None,
    metavar="ISO8601",
    help="Evaluation time, e.g. 2026-07-26T16:30:00Z (default: now). Evidence after it is ignored.",
)
@verdicts_format("A table for people, or the JSON verdict objects.")
@click.option("--open", "only_open", is_flag=True, help="Only waits that are still open.")
@one_line_errors
def audit_cmd(
    config_path: str | None, db: str | None, at: str | None, fmt: str, only_open: bool
) -> None:
    """Classify every known wait at a time and print the verdicts (read-only)."""
    from sidewatch.store.repo import Store

    at_ms = parse_at(at)
    cfg = config_of(config_path, db)
    with opened_store(cfg, read_only=True) as engine:
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


@click.command()
@verdicts_format(
    "The audit as a table for people, or the JSON verdict objects (not with --traffic)."
)
@click.option(
    "--ingest",
    "into_store",
    is_flag=True,
    help="Write the six requests into your store (--config/--db) instead of a throw-away one, "
    "their times moved so the demo's moment is now, and audit that store now.",
)
@click.option(
    "--traffic",
    is_flag=True,
    help="Print the six requests' AG-UI traffic (NDJSON), its times moved so the demo's "
    "moment is now, instead of auditing: pipe it to `sidewatch ingest -` or POST /v1/events.",
)
@config_option
@db_option
@one_line_errors
def demo(
    fmt: str, into_store: bool, traffic: bool, config_path: str | None, db: str | None
) -> None:
    """Load the reference six-request scenario into a throw-away store and audit it.

    One request of each kind: a healthy WAITING wait, a STALE one, an UNROUTABLE one, an
    ORPHANED one, one STUCK_AFTER_DECISION and one CLOSED_BY_DECLINE, evaluated at
    2026-07-26T16:30:00Z with the default policy. Needs no set-up and touches no store of yours.

    The same traffic is examples/traffic.ndjson, dated 26 July 2026: ingested as it is, it
    is audited at its own times, so by now most of it has expired. --ingest and --traffic
    move every time in it (event timestamps, expiresAt) by the same amount, so that
    16:30:00Z on 26 July is the moment you run them: right after, `sidewatch audit --open`
    shows the demo's five open states and the report of the last 24h counts the unit. The
    states then move on with the clock as real waits would (the WAITING one is STALE once
    its expiresAt, 1.5 h later, passes). Ingest it into a store of its own (the same ids
    ingested twice are the same waits, at their first times).
    """
    from sidewatch.app.ingest import Ingest, ref_protector
    from sidewatch.store.repo import Store

    if into_store and traffic:
        raise click.UsageError("--ingest stores the traffic and --traffic prints it: give one")
    if not into_store and (config_path or db):
        raise click.UsageError("--config and --db name the store of --ingest")
    now = parse_at(None) // 1000 * 1000  # whole seconds: the times read as the demo's do
    body = files("sidewatch.cli").joinpath("seed-audit.ndjson").read_bytes()
    if traffic:
        click.echo(shifted(body, now - parse_at(DEMO_AT)).decode(), nl=False)
        return
    if into_store:
        cfg = config_of(config_path, db)
        with opened_store(cfg) as engine:
            store = Store(engine, cfg.heartbeat_gap_ms)
            ingest = Ingest(store, ref_protector(engine, cfg), cfg)
            moved = shifted(body, now - parse_at(DEMO_AT))
            summary = ingest.body("sidewatch-demo.ndjson", moved, now)
            click.echo(
                f"demo traffic into {cfg.db_url}: {summary.accepted} accepted, "
                f"{summary.skipped} skipped, {summary.rejected} rejected",
                err=True,
            )
            _print_audit(store, cfg, parse_at(None), fmt, False)
        return
    with tempfile.TemporaryDirectory(prefix="sidewatch-demo-") as tmp:
        cfg = Config(db_url=f"sqlite:///{Path(tmp) / 'demo.db'}")
        with opened_store(cfg) as engine:
            store = Store(engine)
            ingest = Ingest(store, ref_protector(engine, cfg), cfg)
            ingest.body("seed-audit.ndjson", body, parse_at(DEMO_AT))
            _print_audit(store, cfg, parse_at(DEMO_AT), fmt, False)


def shifted(body: bytes, by_ms: int) -> bytes:
    """The demo's NDJSON with every time in it moved by `by_ms`: each event's `timestamp`
    and each interrupt's `expiresAt` (the only times the scenario holds)."""
    import orjson

    out = []
    for line in body.splitlines():
        if not line.strip():
            continue
        event = orjson.loads(line)
        if isinstance(event.get("timestamp"), int):
            event["timestamp"] += by_ms
        outcome = event.get("outcome")
        for it in outcome.get("interrupts", []) if isinstance(outcome, dict) else []:
            if isinstance(it.get("expiresAt"), str):
                moved = datetime.fromisoformat(it["expiresAt"]) + timedelta(milliseconds=by_ms)
                it["expiresAt"] = moved.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        out.append(orjson.dumps(event))
    return b"\n".join(out) + b"\n"


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


@click.command(name="report")
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
@one_line_errors
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
    end = parse_at(at)
    if end - window_ms < FIRST_MS:  # its charts need a calendar date at every tick
        hint = "--at" if end - FIRST_MS < 86_400_000 else "--window"
        raise click.BadParameter(
            f"the window must start after the year 1 ({window} before {iso(end)} does not)",
            param_hint=hint,
        )
    cfg = config_of(config_path, db)
    with opened_store(cfg, read_only=True) as engine:
        body = render(report(Store(engine), cfg.policies, end, window_ms), fmt, cfg.external_url)
    if output is None:
        click.echo(body.decode(), nl=False)
        return
    path = Path(output)
    if path.is_dir():
        path = path / report_name(end, fmt)
    write_atomic(path, body)
    click.echo(f"wrote {path}", err=True)
