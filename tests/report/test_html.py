"""The HTML report: what a person reads in it, that nothing in it reaches out or runs, and that a
real browser (Debian's headless Chromium) opens it without a console message."""

from __future__ import annotations

import copy
import html as htmllib
import json
import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from sidewatch.report.html import open_series, render_html

SEED = Path(__file__).resolve().parents[1] / "fixtures" / "report-seed.json"
HOSTILE = "<script>alert(1)</script>"
OPEN = ("WAITING", "STALE", "UNROUTABLE", "ORPHANED", "STUCK_AFTER_DECISION")
TIMES = "\N{MULTIPLICATION SIGN}"
# Chromium logs every console message (errors, CSP violations) as `...:CONSOLE:<line>] "..."`
# (older builds: `CONSOLE(<line>)`); the page has no script, so it should log none at all.
CONSOLE = re.compile(r":CONSOLE[:(]|Uncaught")


@pytest.fixture
def report() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SEED.read_text())
    return data


def when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def text_of(html: str) -> str:
    """What a reader sees: the tags dropped, the entities decoded, the spaces collapsed."""
    no_head = re.sub(r"<(style|desc)[^>]*>.*?</\1>", " ", html, flags=re.S)
    return re.sub(r"\s+", " ", htmllib.unescape(re.sub(r"<[^>]+>", " ", no_head)))


def test_every_problem_wait_shows_its_state_and_next_safe_move(report: dict[str, Any]) -> None:
    expected = [
        (
            "thread-invoice/int-invoice ORPHANED Next safe move: Preserve the decision record, "
            "and recover the run with explicit authority."
        ),
        (
            "thread-delete/int-delete STALE Next safe move: Cancel the stale request; create a "
            "new one only if the current run still needs authority."
        ),
        (
            "thread-deploy/int-deploy STUCK_AFTER_DECISION Next safe move: Investigate the "
            "continuation path; do not ask for the same approval again."
        ),
        (
            "thread-rotation/int-rotation UNROUTABLE Next safe move: Repair routing or escalate "
            "to the policy owner; do not restart the work."
        ),
    ]

    text = text_of(render_html(report))

    assert [] == [line for line in expected if line not in text]


def test_problem_waits_show_owner_since_evidence_and_thresholds(report: dict[str, Any]) -> None:
    expected = [
        "Owner policy_owner Since 2026-07-26 16:10:30 UTC Action rotate_credentials",
        "route failed approverRef —",
        "resumeGraceSeconds 5 min heartbeatFreshnessSeconds 10 min routeGraceSeconds 2 min",
    ]

    text = text_of(render_html(report))

    assert [] == [line for line in expected if line not in text]


def test_counts_of_every_state_with_the_change_since_the_previous_window(
    report: dict[str, Any],
) -> None:
    expected = [
        "WAITING 1 +1",
        "STALE 1 +1",
        "UNROUTABLE 1 +1",
        "ORPHANED 1 +1",
        "STUCK_AFTER_DECISION 1 +1",
        "CLOSED_BY_DECLINE 1 +1",
        "RESUMED 0 ±0",
        "CANCELLED 0 ±0",
    ]

    text = text_of(render_html(report))

    assert "5 open, 4 of them in a problem state." in text
    assert [] == [c for c in expected if f"{c} vs. previous window" not in text]


def test_all_six_requests_appear_with_their_transitions(report: dict[str, Any]) -> None:
    expected = [
        "thread-message/int-message WAITING CLOSED_BY_DECLINE",
        "thread-export/int-export ORPHANED WAITING",
        "thread-deploy/int-deploy WAITING STUCK_AFTER_DECISION",
        "thread-delete/int-delete ORPHANED STALE",
        "thread-invoice/int-invoice — ORPHANED",
        "thread-rotation/int-rotation WAITING UNROUTABLE",
        f"WAITING → ORPHANED {TIMES}3",
        f"new → WAITING {TIMES}5",
    ]

    text = text_of(render_html(report))

    assert [] == [t for t in expected if t not in text]


def test_latency_longest_waits_findings_and_ingest(report: dict[str, Any]) -> None:
    report["findings"] = {"expires_at_in_past": 2}
    report["change"]["findings"] = {"expires_at_in_past": 2}
    report["ingest"].update(acceptedLines=40, rejectedLines=3, rejectedByReason={"bad_json": 3})
    expected = [
        "decision · default 2 10 min 20 min 20 min 20 min",
        "thread-delete/int-delete STALE requester 50 min 2026-07-26 15:40:00 UTC delete_records",
        "expires_at_in_past 2 +2",
        "Lines accepted 40 +40",
        "Lines rejected 3 +3",
        "rejected: bad_json 3",
    ]

    text = text_of(render_html(report))

    assert [] == [t for t in expected if t not in text]


def test_an_empty_window_says_so_instead_of_drawing_nothing(report: dict[str, Any]) -> None:
    report.update(transitions=[], transitionCounts={}, problemWaits=[], longestWaits=[])
    report["latency"] = {"decisionSeconds": {}, "resumeSeconds": {}}
    expected = [
        "No wait is in a problem state.",
        "No wait changed state in this window.",
        "No decision or resume in this window.",
        "No wait is open.",
        "No protocol finding in this window or the one before.",
    ]

    text = text_of(render_html(report))

    assert [] == [t for t in expected if t not in text]


def test_open_waits_chart_replays_the_transitions_from_the_previous_counts(
    report: dict[str, Any],
) -> None:
    expected_open = [
        ("2026-07-25 16:30:00", 0),
        ("2026-07-26 15:40:00", 1),
        ("2026-07-26 15:50:00", 2),
        ("2026-07-26 16:00:00", 3),
        ("2026-07-26 16:05:00", 4),
        ("2026-07-26 16:10:00", 5),
        ("2026-07-26 16:10:30", 5),
        ("2026-07-26 16:15:00", 5),
        ("2026-07-26 16:20:00", 5),
        ("2026-07-26 16:25:00", 5),
        ("2026-07-26 16:28:00", 5),
        ("2026-07-26 16:30:00", 5),
    ]
    at_end = {s: n for s, n in report["countsAtEnd"].items() if s in OPEN}

    series = open_series(report)

    assert expected_open == [(when(at), sum(c.values())) for at, c in series]
    assert at_end == series[-1][1]


@pytest.mark.parametrize(
    ("start", "end", "at"),
    [
        ("2026-07-26T16:29:00Z", "2026-07-26T16:30:00Z", "2026-07-26T16:29:30Z"),
        ("2026-07-25T16:30:00Z", "2026-07-26T16:30:00Z", "2026-07-26T12:00:00Z"),
        ("2026-06-26T16:30:00Z", "2026-07-26T16:30:00Z", "2026-06-26T16:30:01Z"),
        ("2025-07-26T16:30:00Z", "2026-07-26T16:30:00Z", "2026-07-26T16:29:59Z"),
    ],
    ids=["one-minute window", "a day", "a month, all at the start", "a year, all at the end"],
)
def test_draws_the_open_waits_chart_for_any_window(
    report: dict[str, Any], start: str, end: str, at: str
) -> None:
    report["window"].update(start=start, end=end)
    report["transitions"] = [
        {"requestId": "r", "at": at, "from": None, "to": "WAITING"},
        {"requestId": "r", "at": at, "from": "WAITING", "to": "STALE"},
    ]

    svg = render_html(report).split("<svg ")[1].split("</svg>")[0]

    assert 'class="st-STALE"' in svg
    assert len(re.findall(r"<text [^>]*>\d\d", svg)) <= 8


def test_draws_both_charts_as_inline_svg(report: dict[str, Any]) -> None:
    html = render_html(report)

    assert 2 == html.count("<svg ")
    assert 'class="st-STUCK_AFTER_DECISION"' in html.split("</svg>")[0]
    assert 'class="q-p99"' in html.split("</svg>")[1]


def test_refers_to_nothing_outside_the_file(report: dict[str, Any]) -> None:
    html = render_html(report)

    assert [] == re.findall(r"(?:src|href)\s*=\s*[\"']?(?:https?:)?//", html)
    assert [] == re.findall(r"<script|@import|url\(|<link rel=\"stylesheet", html)


def test_escapes_what_producers_wrote(report: dict[str, Any]) -> None:
    hostile = copy.deepcopy(report)
    hostile["problemWaits"][0]["requestId"] = HOSTILE
    hostile["problemWaits"][0]["evidence"]["approverRef"] = HOSTILE
    hostile["transitions"][0]["requestId"] = HOSTILE
    hostile["longestWaits"][0]["requestId"] = HOSTILE
    hostile["findings"] = {HOSTILE: 1}
    hostile["ingest"]["rejectedByReason"] = {HOSTILE: 1}

    html = render_html(hostile)

    assert "<script" not in html
    assert 6 == html.count("&lt;script&gt;alert(1)&lt;/script&gt;")


# Headless Chromium, as a reader's browser: it must be installed (`make test` installs it).


def chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("chromium")
    if binary is None:
        pytest.fail(
            "Debian's chromium is missing; `make test` installs it (apt-get install chromium)"
        )
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=1",
    ]
    return subprocess.run(
        [binary, *flags, *args], capture_output=True, text=True, timeout=120, check=False
    )


def console_messages(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if CONSOLE.search(line)]


def test_chromium_opens_the_report_without_a_console_message(
    report: dict[str, Any], tmp_path: Path
) -> None:
    page = tmp_path / "report.html"
    page.write_text(render_html(report))

    run = chromium(tmp_path / "profile", "--dump-dom", page.as_uri())

    assert 0 == run.returncode, run.stderr[-2000:]
    assert [] == console_messages(run.stderr)
    assert (
        "<title>sidewatch audit report, 2026-07-25T16:30:00Z to 2026-07-26T16:30:00Z</title>"
        in run.stdout
    )


def test_the_console_check_sees_errors_and_blocked_loads(tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text(
        "<!doctype html><title>broken</title><script>undefinedFunction()</script>"
        '<script src="https://example.invalid/x.js"></script>'
    )

    run = chromium(tmp_path / "profile", "--dump-dom", page.as_uri())

    assert any("Uncaught ReferenceError" in m for m in console_messages(run.stderr))


def test_chromium_screenshots_the_report(report: dict[str, Any], tmp_path: Path) -> None:
    page, shot = tmp_path / "report.html", tmp_path / "report.png"
    page.write_text(render_html(report))

    run = chromium(
        tmp_path / "profile", f"--screenshot={shot}", "--window-size=1280,2000", page.as_uri()
    )

    assert 0 == run.returncode, run.stderr[-2000:]
    assert [] == console_messages(run.stderr)
    assert b"\x89PNG" == shot.read_bytes()[:4]
    assert shot.stat().st_size > 10_000


def test_with_the_external_url_each_wait_links_to_its_page(report: dict[str, Any]) -> None:
    html = render_html(report, "https://sw.example/base/")
    plain = render_html(report)

    assert '<a href="https://sw.example/base/ui/waits/thread-deploy%2Fint-deploy">' in html
    assert "/ui/waits/" not in plain
