"""The audit report: built from the evidence, rendered for chat, machines and people, written
atomically by date and pruned after its retention."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.app.report import prune, render, report, report_name, write_reports
from sidewatch.cli.main import cli
from sidewatch.config import Config
from sidewatch.daemon.serve import Daemon
from sidewatch.store.db import open_store
from sidewatch.store.lease import AuditLease
from sidewatch.store.repo import Store

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures"
AT = 1_785_083_400_000  # 2026-07-26T16:30:00Z
DAY = 86_400_000
EXPECTED = json.loads((SHARED / "seed-audit.expected.json").read_text())["expected"]


@pytest.fixture
def seeded(db_url: str) -> Iterator[Store]:
    engine = open_store(db_url)
    store = Store(engine)
    Ingest(store, ref_protector(engine, Config()), Config()).body(
        "seed", (SHARED / "seed-audit.ndjson").read_bytes(), AT - 60_000
    )
    yield store
    engine.dispose()


def test_the_reference_report_has_the_six_verdicts_with_evidence_and_next_moves(
    seeded: Store,
) -> None:
    body = report(seeded, Config().policies, AT, DAY)

    waits = body["problemWaits"] + body["changedWaits"]
    assert EXPECTED == {w["requestId"]: w["state"] for w in waits}
    assert all(w["nextMove"] and w["evidence"]["requestedAt"] and w["thresholds"] for w in waits)
    assert {s: 1 for s in EXPECTED.values()} == {s: n for s, n in body["countsAtEnd"].items() if n}
    assert {"count": 2, "p50": 600.0, "p90": 1200.0, "p99": 1200.0, "max": 1200.0} == (
        body["latency"]["decisionSeconds"]["default"]
    )
    assert (1, 50, 18, 0) == (
        body["ingest"]["units"],
        body["ingest"]["acceptedLines"],
        body["ingest"]["skippedLines"],
        body["ingest"]["rejectedLines"],
    )


@pytest.mark.parametrize("fmt", ["md", "json"])
def test_every_format_shows_each_verdict_and_its_next_move(seeded: Store, fmt: str) -> None:
    text = render(report(seeded, Config().policies, AT, DAY), fmt).decode()

    for request, state in EXPECTED.items():
        assert request in text
        assert state in text
    for move in (
        "Investigate the continuation path",
        "Never re-ask",
        "Repair routing",
        "Cancel the stale request",
        "Preserve the decision record",
        "Keep the run paused",
    ):
        assert move in text


def test_the_json_report_follows_its_documented_schema(seeded: Store) -> None:
    body = orjson.loads(render(report(seeded, Config().policies, AT, DAY), "json"))
    documented = (Path(__file__).resolve().parents[2] / "docs" / "reports.md").read_text()

    assert 1 == body["schemaVersion"]
    for key in body:
        assert f"`{key}`" in documented, key


def test_the_previous_window_is_compared(seeded: Store) -> None:
    body = report(seeded, Config().policies, AT + DAY, DAY)

    assert 1 == body["previous"]["counts"]["STUCK_AFTER_DECISION"]
    assert 0 == body["change"]["counts"]["STUCK_AFTER_DECISION"]
    assert [] == body["changedWaits"]  # nothing moved on the next day


def test_a_thousand_waits_and_their_transitions_make_a_report(db_url: str) -> None:
    lines = []
    for n in range(1000):
        t, at = f"thread-{n}", AT - 3_600_000 + n * 1000
        lines += [
            {
                "type": "RUN_FINISHED",
                "threadId": t,
                "runId": f"{t}-r",
                "timestamp": at,
                "outcome": {
                    "type": "interrupt",
                    "interrupts": [
                        {"id": "i", "reason": "tool_call", "metadata": {"resumeHandle": "h"}}
                    ],
                },
            },
            {
                "type": "CUSTOM",
                "name": "sidewatch.route",
                "timestamp": at + 1000,
                "value": {
                    "threadId": t,
                    "interruptId": "i",
                    "delivered": n % 10 != 0,
                    "approverRef": "role:ops",
                },
            },
            {
                "type": "CUSTOM",
                "name": "sidewatch.decision",
                "timestamp": at + 60_000,
                "value": {
                    "threadId": t,
                    "interruptId": "i",
                    "decision": "decline" if n % 3 == 0 else "accept",
                },
            },
        ]
    engine = open_store(db_url)
    store = Store(engine)
    Ingest(store, ref_protector(engine, Config()), Config()).body(
        "many", "\n".join(json.dumps(x) for x in lines).encode(), AT
    )

    body = report(store, Config().policies, AT, DAY)
    html = render(body, "html")
    engine.dispose()

    assert 1000 == sum(body["countsAtEnd"].values())
    assert 333 + 1 == body["countsAtEnd"]["CLOSED_BY_DECLINE"]
    assert len(body["transitions"]) >= 2000
    assert html.startswith(b"<!DOCTYPE html>") or html.lower().startswith(b"<!doctype html>")


def test_reports_are_written_atomically_by_date_and_pruned_after_retention(
    seeded: Store, tmp_path: Path
) -> None:
    out = tmp_path / "reports"
    out.mkdir()
    old = out / "sidewatch-report-2026-06-01.md"
    old.write_text("old")
    unrelated = out / "notes.md"
    unrelated.write_text("mine")

    paths = write_reports(
        out,
        lambda: report(seeded, Config().policies, AT, DAY),
        AT,
        ("md", "json", "html"),
        30 * DAY,
        now=AT / 1000,
    )

    assert sorted(p.name for p in paths) == sorted(
        [
            "sidewatch-report-2026-07-26.md",
            "sidewatch-report-2026-07-26.json",
            "sidewatch-report-2026-07-26.html",
        ]
    )
    assert (not old.exists(), unrelated.exists()) == (True, True)
    assert [] == [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary left
    assert [] == prune(out, 30 * DAY, AT / 1000)


def test_the_report_command_prints_or_writes_a_dated_file(
    seeded: Store, db_url: str, tmp_path: Path
) -> None:
    db = db_url
    runner = CliRunner()

    printed = runner.invoke(cli, ["report", "--db", db, "--at", "2026-07-26T16:30:00Z"])
    written = runner.invoke(
        cli,
        [
            "report",
            "--db",
            db,
            "--at",
            "2026-07-26T16:30:00Z",
            "--format",
            "json",
            "--output",
            str(tmp_path),
        ],
    )
    bad = runner.invoke(cli, ["report", "--db", db, "--window", "a while"])

    assert 0 == printed.exit_code
    assert printed.output.startswith("# sidewatch audit report: 2026-07-25T16:30:00Z")
    assert 0 == written.exit_code
    assert (tmp_path / report_name(AT, "json")).is_file()
    assert 2 == bad.exit_code


def test_report_names_are_the_window_end_date() -> None:
    assert "sidewatch-report-2026-07-26.html" == report_name(AT, "html")
    assert os.sep not in report_name(AT, "md")


def test_the_nightly_job_writes_every_configured_format(
    seeded: Store, db_url: str, tmp_path: Path
) -> None:
    out = tmp_path / "nightly"
    config = replace(
        Config(),
        db_url=db_url,
        report_directory=str(out),
        report_formats=("md", "json"),
    )
    daemon = Daemon(config)

    asyncio.run(daemon.nightly_report())
    daemon.engine.dispose()

    assert 2 == len(list(out.glob("sidewatch-report-*")))


def test_a_standby_replica_writes_no_nightly_report(
    seeded: Store, db_url: str, tmp_path: Path
) -> None:
    other = AuditLease(seeded.engine, 60_000, "the-auditing-replica")
    other.claim()
    out = tmp_path / "nightly"
    config = replace(Config(), db_url=db_url, report_directory=str(out))
    daemon = Daemon(config)

    asyncio.run(daemon.nightly_report())
    daemon.engine.dispose()

    assert (True, False) == (other.held, daemon.lease.held)
    assert not out.exists() or [] == list(out.iterdir())


def test_the_html_report_shows_the_six_verdicts_and_their_next_moves(seeded: Store) -> None:
    text = render(report(seeded, Config().policies, AT, DAY), "html").decode()

    for request, state in EXPECTED.items():
        assert request in text
        assert state in text
    for move in ("Investigate the continuation path", "Never re-ask", "Keep the run paused"):
        assert move in text


def test_a_long_audit_trail_is_cut_in_the_page_and_whole_in_the_json() -> None:
    seed = json.loads(
        (Path(__file__).resolve().parents[1] / "fixtures" / "report-seed.json").read_text()
    )
    seed["changedWaits"] = seed["changedWaits"][:1] * 600
    seed["transitions"] = seed["transitions"][:1] * 700

    html = render(seed, "html").decode()
    md = render(seed, "md").decode()

    assert "100 more waits are in the JSON report." in html
    assert "200 more transitions are in the JSON report." in html
    assert "...and 100 more, in the JSON report." in md
    assert 600 == len(orjson.loads(render(seed, "json"))["changedWaits"])


def test_a_wait_on_evidence_nobody_reported_is_shown_apart_with_its_own_next_move(
    db_url: str,
) -> None:
    """AG-UI traffic only: no route evidence, so UNROUTABLE past routeGrace, uncertain."""
    run = {"threadId": "t-agui", "runId": "r-1"}
    outcome = {"type": "interrupt", "interrupts": [{"id": "i-1", "reason": "tool_call"}]}
    lines = [
        {"type": "RUN_STARTED", **run, "timestamp": AT - 6 * 60_000},
        {"type": "RUN_FINISHED", **run, "outcome": outcome, "timestamp": AT - 5 * 60_000},
    ]
    engine = open_store(db_url)
    try:
        store = Store(engine)
        body = b"\n".join(orjson.dumps(line) for line in lines)
        Ingest(store, ref_protector(engine, Config()), Config()).body("agui", body, AT - 60_000)
        built = report(store, Config().policies, AT, DAY)
    finally:
        engine.dispose()

    (wait,) = built["problemWaits"]
    md, html = (render(built, fmt).decode() for fmt in ("md", "html"))

    assert ("UNROUTABLE", "policy_owner", ["route"]) == (
        wait["state"],
        wait["owner"],
        wait["unreported"],
    )
    assert wait["nextMove"].startswith("Uncertain: never reported (route). Whoever runs sidewatch")
    assert "### UNROUTABLE: `t-agui/i-1` (uncertain: never reported: route)" in md
    assert "1 of them rest on evidence nobody reports" in md
    assert wait["nextMove"] in md
    assert '<span class="badge unreported">uncertain: never reported: route</span>' in html
