"""The wait pages (`/ui`, `/ui/waits`, `/ui/waits/{requestId}`) and the runbooks, through
Starlette's TestClient on a real SQLite store holding the reference six requests."""

from __future__ import annotations

import asyncio
import dataclasses
import html as htmllib
import re
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from sidewatch.config import Config
from sidewatch.daemon.serve import Daemon
from sidewatch.daemon.ui import ENV, audit_command, render_detail
from tests.daemon.test_http import (
    DEPLOY,
    EXPECTED_STATES,
    INGEST_TOKEN,
    MIN,
    NDJSON,
    READ_TOKEN,
    bearer,
    custom,
    ndjson,
    scenario,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette's note that it falls back to httpx
    from starlette.testclient import TestClient

URGENCY = (
    "STUCK_AFTER_DECISION",
    "ORPHANED",
    "UNROUTABLE",
    "STALE",
    "WAITING",
    "CLOSED_BY_DECLINE",
)


def text_of(html: str) -> str:
    no_head = re.sub(r"<(style|title)[^>]*>.*?</\1>", " ", html, flags=re.S)
    return re.sub(r"\s+", " ", htmllib.unescape(re.sub(r"<[^>]+>", " ", no_head)))


def make(
    tmp_path: Path, now: int, db_url: str | None = None, extra: Sequence[Any] = (), **changes: Any
) -> tuple[Daemon, TestClient]:
    """A daemon on `db_url` (else a new SQLite file) holding the six requests and `extra`
    lines, audited at `now`."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    changes = {"allowed_hosts": ("testserver",), **changes}
    db_url = db_url or f"sqlite:///{tmp_path / 'sw.db'}"
    config = dataclasses.replace(Config(), db_url=db_url, **changes)
    daemon = Daemon(config)
    client = TestClient(daemon.app)
    headers = {**NDJSON, **(bearer(INGEST_TOKEN) if config.tokens else {})}
    body = ndjson([*scenario(now), *extra])
    assert 200 == client.post("/v1/events", content=body, headers=headers).status_code
    daemon.auditor.tick(now)
    return daemon, client


@pytest.fixture
def guarded(tmp_path: Path) -> TestClient:
    _, client = make(tmp_path, int(time.time()) * 1000, tokens=(INGEST_TOKEN, READ_TOKEN))
    return client


def listed_states(html: str) -> list[str]:
    return re.findall(r'<tr class="st-\w+" data-state="(\w+)">', html)


def test_the_list_puts_pages_first_then_tickets_then_long_waits(guarded: TestClient) -> None:
    r = guarded.get("/ui/waits", headers=bearer(READ_TOKEN))

    assert 200 == r.status_code
    assert list(URGENCY) == listed_states(r.text)
    assert "text/html" in r.headers["content-type"]
    assert "default-src 'none'" in r.headers["content-security-policy"]
    assert '.badge::before,.sw{content:"";' in r.text  # the style sheet itself is not escaped


def test_the_list_counts_every_state_and_filters_by_state_policy_owner_uncertain(
    guarded: TestClient,
) -> None:
    page = guarded.get("/ui/waits", headers=bearer(READ_TOKEN)).text
    text = text_of(page)
    by_owner = guarded.get("/ui/waits?owner=runtime_owner", headers=bearer(READ_TOKEN)).text
    by_state = guarded.get("/ui/waits?state=STALE&policy=default", headers=bearer(READ_TOKEN)).text
    certain = guarded.get("/ui/waits?uncertain=no", headers=bearer(READ_TOKEN)).text

    assert "5 open" in text
    assert "STUCK_AFTER_DECISION 1" in text and "RESUMED 0" in text
    assert ["STUCK_AFTER_DECISION", "ORPHANED"] == listed_states(by_owner)
    assert ["STALE"] == listed_states(by_state)
    assert list(URGENCY) == listed_states(certain)


def test_each_wait_page_shows_verdict_evidence_next_move_and_timeline(
    guarded: TestClient,
) -> None:
    for request_id, state in EXPECTED_STATES.items():
        r = guarded.get(f"/ui/waits/{request_id}", headers=bearer(READ_TOKEN))
        text = text_of(r.text)

        assert 200 == r.status_code
        assert f"{request_id} " in text
        assert state in text
        assert "Next safe move:" in text
        for piece in ("route", "handle", "heartbeat", "decision"):
            assert re.search(rf"{piece} (present|failing|never reported|not yet)", text), piece
        assert re.search(r"\+0 s \S+ requested ", text)


def test_the_stuck_wait_page_shows_its_owner_and_its_decision_after_the_request(
    guarded: TestClient,
) -> None:
    text = text_of(guarded.get(f"/ui/waits/{DEPLOY}", headers=bearer(READ_TOKEN)).text)

    assert "Owner: runtime_owner" in text
    assert "decision present accept" in text
    assert "transition" in text and "sidewatch audit --open" in text


def test_an_unknown_request_id_is_a_404_that_says_what_a_request_id_looks_like(
    guarded: TestClient,
) -> None:
    r = guarded.get("/ui/waits/no-such/wait", headers=bearer(READ_TOKEN))

    assert 404 == r.status_code
    assert "{threadId}/{interruptId}" in text_of(r.text)


def test_without_a_token_every_page_is_401_with_a_login_form(guarded: TestClient) -> None:
    for path in ("/ui", "/ui/waits", f"/ui/waits/{DEPLOY}", "/ui/report"):
        r = guarded.get(path)

        assert 401 == r.status_code, path
        assert '<form method="post" action="/ui/login">' in r.text
        assert DEPLOY not in r.text


def test_an_ingest_token_is_not_enough_to_read(guarded: TestClient) -> None:
    assert 403 == guarded.get("/ui/waits", headers=bearer(INGEST_TOKEN)).status_code


def test_the_login_form_sets_a_cookie_derived_from_the_token_not_the_token(
    guarded: TestClient,
) -> None:
    refused = guarded.post("/ui/login", data={"token": "not-a-token-0123456789"})
    r = guarded.post("/ui/login", data={"token": READ_TOKEN.secret}, follow_redirects=False)
    cookie = r.headers["set-cookie"]

    assert 401 == refused.status_code
    assert 303 == r.status_code
    assert READ_TOKEN.secret not in cookie
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert list(URGENCY) == listed_states(guarded.get("/ui/waits").text)


def test_a_producers_markup_is_shown_as_text() -> None:
    hostile = "<script>alert(1)</script>"
    w = {
        "requestId": hostile,
        "threadId": hostile,
        "runId": "r",
        "interruptId": "i",
        "action": hostile,
        "reason": None,
        "policy": "default",
        "state": "WAITING",
        "phase": None,
        "closed": False,
        "owner": "approver",
        "nextMove": "wait",
        "since": "2026-07-26T16:00:00Z",
        "uncertain": True,
        "missing": ["route"],
        "thresholds": {
            "resumeGraceSeconds": 1,
            "heartbeatFreshnessSeconds": 1,
            "routeGraceSeconds": 1,
        },
        "evidence": {
            "requestedAt": "2026-07-26T16:00:00Z",
            "route": "none",
            "approverRef": hostile,
            "resumeHandle": True,
            "lastHeartbeatAt": None,
            "decision": None,
            "decidedAt": None,
        },
        "findings": [hostile],
        "evaluatedAt": "2026-07-26T16:30:00Z",
        "timeline": [{"at": "2026-07-26T16:00:00Z", "kind": "requested", "runId": hostile}],
        "transitions": [],
    }

    html = render_detail(w)

    assert "<script" not in html
    assert "&lt;script&gt;" in html


def test_a_long_timeline_is_shown_whole_with_times_relative_to_the_request(
    guarded: TestClient,
) -> None:
    w = guarded.get(f"/v1/waits/{DEPLOY}", headers=bearer(READ_TOKEN)).json()
    beat = {"kind": "heartbeat", "resumeHandle": True}
    w["timeline"] += [{"at": w["evidence"]["requestedAt"], **beat}] * 1000

    html = render_detail(w)

    assert len(w["timeline"]) + len(w["transitions"]) == html.count("<tr><td class=num>")
    assert 1000 <= html.count("<td>heartbeat</td>")


def _runbook_links(html: str) -> list[str]:
    found = re.search(r'<p class=big id="runbook">(.*?)</p>', html, flags=re.S)
    return re.findall(r'href="([^"]+)"', found.group(1)) if found else []


def test_each_open_wait_page_links_its_states_runbook_which_the_daemon_serves(
    guarded: TestClient,
) -> None:
    links, served = {}, {}
    for request_id, state in EXPECTED_STATES.items():
        html = guarded.get(f"/ui/waits/{request_id}", headers=bearer(READ_TOKEN)).text
        links[state] = _runbook_links(html)
        served.update({link: guarded.get(link).status_code for link in links[state]})

    assert {
        "WAITING": ["/runbooks/waiting.md"],
        "STALE": ["/runbooks/stale.md"],
        "UNROUTABLE": ["/runbooks/unroutable.md"],
        "ORPHANED": ["/runbooks/orphaned.md"],
        "STUCK_AFTER_DECISION": ["/runbooks/stuck-after-decision.md"],
        "CLOSED_BY_DECLINE": [],  # closed: nothing to follow
    } == links
    assert {200} == set(served.values())


def test_the_runbook_link_is_absolute_with_the_external_url(tmp_path: Path) -> None:
    _, client = make(tmp_path, int(time.time()) * 1000, external_url="https://sw.example")

    html = client.get(f"/ui/waits/{DEPLOY}").text

    assert ["https://sw.example/runbooks/stuck-after-decision.md"] == _runbook_links(html)


def test_a_wait_on_unreported_evidence_links_the_evidence_unreported_runbook_too() -> None:
    w = _rendered_wait(state="UNROUTABLE", uncertain=True, missing=["route"])

    assert ["/runbooks/unroutable.md", "/runbooks/evidence-unreported.md"] == _runbook_links(
        render_detail(w)
    )


def _rendered_wait(**changes: Any) -> dict[str, Any]:
    """A `GET /v1/waits/{requestId}` answer, as the page is rendered from."""
    w = {
        "requestId": "t/i",
        "threadId": "t",
        "runId": "r",
        "interruptId": "i",
        "action": "deploy",
        "reason": None,
        "policy": "default",
        "state": "ORPHANED",
        "phase": None,
        "closed": False,
        "owner": "runtime_owner",
        "nextMove": "Find the runtime.",
        "since": "2026-07-26T16:00:00Z",
        "uncertain": False,
        "missing": [],
        "thresholds": {
            "resumeGraceSeconds": 1,
            "heartbeatFreshnessSeconds": 1,
            "routeGraceSeconds": 1,
        },
        "evidence": {
            "requestedAt": "2026-07-26T15:50:00Z",
            "route": "delivered",
            "approverRef": "role:ops",
            "resumeHandle": False,
            "lastHeartbeatAt": None,
            "decision": None,
            "decidedAt": None,
        },
        "findings": [],
        "evaluatedAt": "2026-07-26T16:25:00Z",
        "timeline": [{"at": "2026-07-26T15:50:00Z", "kind": "requested", "runId": "r"}],
        "transitions": [],
    }
    return w | changes


@pytest.mark.parametrize(
    ("since", "shown"),
    [
        ("2026-07-26T16:00:00Z", "in this state for 25 min"),
        ("2026-07-26T14:24:30Z", "in this state for 2 h 30 s"),
        ("2026-07-26T16:24:58Z", "in this state for 2 s"),
    ],
    ids=["minutes", "hours", "seconds"],
)
def test_the_wait_page_says_how_long_the_wait_has_been_in_its_state(since: str, shown: str) -> None:
    w = _rendered_wait(since=since)  # evaluated at 16:25:00

    assert shown in text_of(render_detail(w))


def test_a_live_wait_page_says_how_long_since_it_became_stuck(tmp_path: Path) -> None:
    now = int(time.time()) * 1000
    _, client = make(tmp_path, now)

    text = text_of(client.get(f"/ui/waits/{DEPLOY}").text)

    # accepted ten minutes ago, stuck since the five-minute resume grace ran out
    assert re.search(r"in this state for (4 min [0-9]+ s|5 min( [0-9]+ s)?)", text), text


def _bound(now: int) -> list[dict[str, Any]]:
    """The tap's liveness for the invoice wait: bound to its instance of service `billing`,
    a run that does not survive the process, and the instance's beats, the last 20 min ago."""
    instance = {"service": "billing", "instance": "pod-7", "durable": False}
    return [
        custom("heartbeat", now - 29 * MIN, **instance),
        custom(
            "heartbeat",
            now - 29 * MIN,
            **instance,
            threadId="thread-invoice",
            runId="run-thread-invoice",
        ),
        custom("heartbeat", now - 20 * MIN, **instance),
    ]


def test_an_orphaned_wait_page_shows_the_instance_it_was_bound_to_and_durable_false(
    tmp_path: Path, db_url: str
) -> None:
    now = int(time.time()) * 1000
    daemon, client = make(tmp_path, now, db_url=db_url, extra=_bound(now))
    try:
        html = client.get("/ui/waits/thread-invoice/int-invoice").text
        other = text_of(client.get(f"/ui/waits/{DEPLOY}").text)
    finally:
        daemon.engine.dispose()
    text = text_of(html)
    beat = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime((now - 20 * MIN) // 1000))

    assert "ORPHANED" in text
    assert (
        f"Service billing instance pod-7 · durable: false · bound "
        f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime((now - 29 * MIN) // 1000))} UTC "
        f"· for run run-thread-invoice · last beat {beat} UTC"
    ) in text
    assert "Resume handle durable: false" in text  # the runtime's own heartbeat said none
    assert "No service instance bound" in other and "Resume handle durable: true" in other


def test_an_unroutable_wait_shows_its_routes_channel_in_the_timeline_and_the_page(
    tmp_path: Path, db_url: str
) -> None:
    daemon, client = make(tmp_path, int(time.time()) * 1000, db_url=db_url)
    try:
        body = client.get("/v1/waits/thread-rotation/int-rotation").json()
        html = client.get("/ui/waits/thread-rotation/int-rotation").text
    finally:
        daemon.engine.dispose()
    routes = [t for t in body["timeline"] if t["kind"] == "route"]

    assert "UNROUTABLE" == body["state"]
    assert [("chat", False)] == [(r["channel"], r["delivered"]) for r in routes]
    assert "Route channel chat" in text_of(html)
    assert "no approver is attached" not in html  # the route's error text is never kept


def test_a_route_channel_that_is_no_code_is_kept_as_none_and_the_route_stands(
    tmp_path: Path, db_url: str
) -> None:
    now = int(time.time()) * 1000
    bad = custom(
        "route",
        now - 2 * MIN,
        threadId="thread-rotation",
        interruptId="int-rotation",
        channel="#ops <b>paging</b>",
        delivered=False,
    )
    daemon, client = make(tmp_path, now, db_url=db_url, extra=[bad])
    try:
        body = client.get("/v1/waits/thread-rotation/int-rotation").json()
        html = client.get("/ui/waits/thread-rotation/int-rotation").text
        metrics = client.get("/metrics").text
    finally:
        daemon.engine.dispose()
    routes = [t for t in body["timeline"] if t["kind"] == "route"]

    assert [("chat", False), (None, False)] == [(r["channel"], r["delivered"]) for r in routes]
    assert 'sidewatch_protocol_findings_total{rule="route_channel_invalid"} 1.0' in metrics
    assert "paging" not in html and "Route channel chat" in text_of(html)


def test_runbooks_are_served_by_name_and_nothing_else_is(guarded: TestClient) -> None:
    ok = guarded.get("/runbooks/stuck-after-decision.md")
    outside = guarded.get("/runbooks/..%2F..%2FREADME.md")

    assert 200 == ok.status_code and "STUCK_AFTER_DECISION" in ok.text
    assert 404 == outside.status_code


def test_without_tokens_configured_the_pages_are_open_as_the_read_api_is(
    tmp_path: Path,
) -> None:
    _, client = make(tmp_path, int(time.time()) * 1000)

    assert list(URGENCY) == listed_states(client.get("/ui/waits").text)


def test_http_answers_are_counted_by_route_template_and_code(guarded: TestClient) -> None:
    guarded.get("/ui/waits/no-such/wait", headers=bearer(READ_TOKEN))
    guarded.get("/ui/waits")
    guarded.get("/no/such/path/at/all")

    metrics = guarded.get("/metrics", headers=bearer(READ_TOKEN)).text

    assert (
        'sidewatch_http_responses_total{code="404",route="/ui/waits/{request_id:path}"} 1.0'
        in metrics
    )
    assert 'sidewatch_http_responses_total{code="401",route="/ui/waits"} 1.0' in metrics
    assert 'sidewatch_http_responses_total{code="404",route="other"} 1.0' in metrics
    assert 'sidewatch_http_responses_total{code="200",route="/v1/events"} 1.0' in metrics
    assert "sidewatch_audit_interval_seconds 30.0" in metrics
    assert "sidewatch_report_failures_total 0.0" in metrics


def test_scheduled_report_runs_and_failures_are_counted_with_the_last_success(
    tmp_path: Path,
) -> None:
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the reports should go")
    good, _ = make(tmp_path / "good", int(time.time()) * 1000, report_directory=str(tmp_path))
    bad, _ = make(tmp_path / "bad", int(time.time()) * 1000, report_directory=str(blocked))
    for daemon in (good, bad):
        daemon.lease.claim()
        asyncio.run(daemon.nightly_report())

    assert (1, 0) == (good.state.selfwatch.report_runs, good.state.selfwatch.report_failures)
    assert good.state.selfwatch.report_last_success > 0
    assert (1, 1, 0.0) == (
        bad.state.selfwatch.report_runs,
        bad.state.selfwatch.report_failures,
        bad.state.selfwatch.report_last_success,
    )


# -- ids that do not break mid-word (Chromium at 1280 px: tests/daemon/test_first_hour.py) -----


def test_the_list_keeps_ids_times_and_action_names_whole_with_its_css(
    guarded: TestClient,
) -> None:
    page = guarded.get("/ui/waits", headers=bearer(READ_TOKEN)).text

    assert "table.waits code{word-break:normal;overflow-wrap:normal}" in page  # not break-all
    assert "table.waits .seg,table.waits td.action code{white-space:nowrap}" in page
    assert "main.wide{max-width:1400px}" in page and "<main class=wide>" in page
    assert (
        "<code><span class=seg>thread-deploy</span>/<wbr><span class=seg>int-deploy</span></code>"
        in page
    )
    assert "<td class=action><code>deploy_service</code></td>" in page
    assert re.search(r"<time [^>]*><span class=seg>\d{4}-\d\d-\d\d</span> <span class=seg>", page)
    assert "thread-deploy/int-deploy" in re.sub(r"<[^>]+>", "", page)  # copied, it is the id


def test_an_id_breaks_before_its_run_and_its_parts_stay_escaped() -> None:
    shown = ENV.filters["breakable"]("t<x>/i@run-2")

    assert (
        "<span class=seg>t&lt;x&gt;</span>/<wbr><span class=seg>i</span><wbr>@"
        "<span class=seg>run-2</span>"
    ) == str(shown)


# -- the wait page's `audit` line: the daemon's own store and config --------------------------


def test_the_audit_line_names_the_daemons_config_and_store_absolutely(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    line = audit_command("conf/sidewatch.yaml", "sqlite:///./data/sw.db")

    assert line.endswith(
        f" audit --open --config {tmp_path}/conf/sidewatch.yaml --db sqlite:///{tmp_path}/data/sw.db"
    )


def test_the_audit_line_never_shows_a_password() -> None:
    line = audit_command(None, "postgresql+psycopg://sw:s3cret@db.internal:5432/sidewatch")

    assert line.endswith(" audit --open --db postgresql+psycopg://sw@db.internal:5432/sidewatch")
    assert "s3cret" not in line


def test_the_wait_page_shows_the_daemons_audit_line(tmp_path: Path) -> None:
    daemon, client = make(tmp_path, int(time.time()) * 1000)
    daemon.state.audit_command = "sidewatch audit --open --db sqlite:////srv/sw.db"

    page = client.get(f"/ui/waits/{DEPLOY.replace('/', '%2F')}").text

    assert "<pre class=cmd>sidewatch audit --open --db sqlite:////srv/sw.db</pre>" in page
