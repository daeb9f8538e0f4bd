"""The optional Alertmanager push, against a real Alertmanager (Debian's package), and against
a local receiver that counts pushes and their sizes and can fail them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from sidewatch.core.model import Missing, uncertain_move
from sidewatch.daemon.ui import RUNBOOKS
from sidewatch.exporters import mixin
from sidewatch.exporters.alertmanager import SEVERITY, AlertmanagerPush, ProblemWait, runbook_path
from tests.daemon.test_e2e import Server, _seed_relative_to_now, _start, _stop
from tests.ports import free_port as _free_port

ROOT = Path(__file__).resolve().parents[2]
UNPACKED = ROOT / ".tools" / "alertmanager" / "usr" / "bin" / "prometheus-alertmanager"
DASHBOARD = "https://grafana.example/d/sidewatch?orgId=1"


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[str]:
    yield from _alertmanager(tmp_path, "")


def _alertmanager(tmp_path: Path, extra: str) -> Iterator[str]:
    """A real Alertmanager on a free port; `extra` is appended to its config."""
    binary = os.environ.get("SIDEWATCH_ALERTMANAGER") or str(UNPACKED)
    if not Path(binary).is_file():
        pytest.fail(f"Alertmanager not found at {binary}: `make test` unpacks it")
    port = _free_port()
    config = tmp_path / "alertmanager.yml"
    config.write_text("route: {receiver: nobody}\nreceivers: [{name: nobody}]\n" + extra)
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.path={tmp_path / 'am'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _active(url: str) -> dict[str, dict]:
    alerts = httpx.get(f"{url}/api/v2/alerts", params={"active": "true"}).json()
    return {
        a["labels"]["requestId"]: a
        for a in alerts
        if a["labels"].get("alertname") == "SidewatchWait" and a["status"]["state"] == "active"
    }


def _until(fn, seconds: float = 20.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while True:
        value = fn()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.25)


@pytest.fixture
def sidewatch(tmp_path: Path, db_url: str, alertmanager: str) -> Iterator[Server]:
    extra = f"alertmanager: {{url: '{alertmanager}', resendInterval: 2s}}\n"
    server = _start(tmp_path, db_url, extra=extra)
    yield server
    _stop(server)


def test_each_problem_wait_is_one_alert_with_its_owner_and_next_move(
    alertmanager: str, sidewatch: Server
) -> None:
    body, _ = _seed_relative_to_now()
    httpx.post(
        f"{sidewatch.url}/v1/events", content=body, headers={"content-type": "application/x-ndjson"}
    )

    active = _until(lambda: len(_active(alertmanager)) == 4 and _active(alertmanager))

    assert {
        "thread-delete/int-delete": ("STALE", "requester", "warning"),
        "thread-rotation/int-rotation": ("UNROUTABLE", "policy_owner", "critical"),
        "thread-invoice/int-invoice": ("ORPHANED", "runtime_owner", "critical"),
        "thread-deploy/int-deploy": ("STUCK_AFTER_DECISION", "runtime_owner", "critical"),
    } == {
        k: (a["labels"]["state"], a["labels"]["owner"], a["labels"]["severity"])
        for k, a in active.items()
    }
    deploy = active["thread-deploy/int-deploy"]
    assert "default" == deploy["labels"]["policy"]
    assert deploy["annotations"]["nextMove"].startswith("Investigate the continuation path")
    assert "accept" == json.loads(deploy["annotations"]["evidence"])["decision"]
    assert 300 == json.loads(deploy["annotations"]["thresholds"])["resumeGraceSeconds"]


def test_an_alert_resolves_when_its_wait_leaves_the_state(
    alertmanager: str, sidewatch: Server
) -> None:
    body, _ = _seed_relative_to_now()
    httpx.post(
        f"{sidewatch.url}/v1/events", content=body, headers={"content-type": "application/x-ndjson"}
    )
    assert _until(lambda: "thread-deploy/int-deploy" in _active(alertmanager))

    receipt = {
        "type": "CUSTOM",
        "name": "sidewatch.receipt",
        "value": {"threadId": "thread-deploy", "interruptId": "int-deploy"},
    }
    httpx.post(
        f"{sidewatch.url}/v1/events",
        content=json.dumps(receipt).encode(),
        headers={"content-type": "application/x-ndjson"},
    )
    gone = _until(lambda: "thread-deploy/int-deploy" not in _active(alertmanager))

    assert gone
    assert {
        "thread-delete/int-delete",
        "thread-rotation/int-rotation",
        "thread-invoice/int-invoice",
    } == set(_active(alertmanager))


def test_a_push_of_one_alert_at_most_gets_every_alert_there_over_the_ticks(
    tmp_path: Path, db_url: str, alertmanager: str
) -> None:
    extra = f"alertmanager: {{url: '{alertmanager}', resendInterval: 2s, maxAlertsPerPush: 1}}\n"
    server = _start(tmp_path, db_url, extra=extra)
    try:
        body, _ = _seed_relative_to_now()
        httpx.post(
            f"{server.url}/v1/events",
            content=body,
            headers={"content-type": "application/x-ndjson"},
        )

        active = _until(lambda: len(_active(alertmanager)) == 4 and _active(alertmanager))
        held = _until(lambda: "sidewatch_alertmanager_alerts_held_back 0.0" in metrics(server))
    finally:
        _stop(server)

    assert 4 == len(active)
    assert held


def metrics(server: Server) -> str:
    return httpx.get(f"{server.url}/metrics").text


# -- floods, failures and long ids, against a local receiver that counts what it is sent -----

NOW = 1_785_083_400_000
TICK = 30_000


class Receiver:
    """A stand-in Alertmanager: records each push's alerts and size; `status` is its answer."""

    def __init__(self) -> None:
        self.pushes: list[list[dict[str, Any]]] = []
        self.sizes: list[int] = []
        self.status = 200
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.sizes.append(len(body))
                receiver.pushes.append(json.loads(body))
                self.send_response(receiver.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.server.shutdown()
    r.server.server_close()


def stale(n: int, since: int = NOW - 3_600_000, state: str = "STALE") -> list[ProblemWait]:
    evidence = json.dumps({"approverRef": "role:data-owner", "route": "delivered"})
    return [
        ProblemWait(
            f"thread-{i}/int-{i}",
            state,
            "requester",
            "default",
            since + i,
            "Cancel.",
            evidence,
            "{}",
        )
        for i in range(n)
    ]


def test_a_flood_goes_out_in_batches_of_max_alerts_per_push_one_a_tick(
    receiver: Receiver,
) -> None:
    push = AlertmanagerPush(receiver.url, resend_ms=60_000, max_per_push=500, tick_ms=TICK)
    waits = stale(5000)

    held = []
    for k in range(10):
        push.push(waits, NOW + k * TICK)
        held.append(push.held_back)

    assert [500] * 10 == [len(p) for p in receiver.pushes]
    assert list(range(4500, -1, -500)) == held
    assert 5000 == len({a["labels"]["requestId"] for p in receiver.pushes for a in p})
    assert max(receiver.sizes) < 500_000
    # oldest first, and each expires after three rounds of the backlog, not three resends
    assert "thread-0/int-0" == receiver.pushes[0][0]["labels"]["requestId"]
    ends = datetime.fromisoformat(receiver.pushes[0][0]["endsAt"]).timestamp() * 1000
    assert NOW + 3 * 10 * TICK == ends


def test_pages_go_before_tickets_and_resolutions_before_both(receiver: Receiver) -> None:
    push = AlertmanagerPush(receiver.url, resend_ms=60_000, max_per_push=2, tick_ms=TICK)
    tickets = stale(2)
    push.push(tickets, NOW)
    pages = [replace(w, request_id=f"page-{i}", state="ORPHANED") for i, w in enumerate(stale(3))]

    push.push(tickets[1:] + pages, NOW + TICK)

    assert [("thread-0/int-0", True), ("page-0", False)] == [
        (a["labels"]["requestId"], a["endsAt"] == "2026-07-26T16:30:30.000Z")
        for a in receiver.pushes[1]
    ]


def test_resends_are_batched_too_the_longest_unsent_first(receiver: Receiver) -> None:
    push = AlertmanagerPush(receiver.url, resend_ms=60_000, max_per_push=500, tick_ms=TICK)
    waits = stale(1000)
    push.push(waits, NOW)
    push.push(waits, NOW + TICK)  # all 1000 active now
    first, second = ({a["labels"]["requestId"] for a in p} for p in receiver.pushes)

    push.push(waits, NOW + 2 * TICK)  # the first 500 are due again
    push.push(waits, NOW + 3 * TICK)  # then the next 500

    assert [500, 500, 500, 500] == [len(p) for p in receiver.pushes]
    assert first == {a["labels"]["requestId"] for a in receiver.pushes[2]}
    assert second == {a["labels"]["requestId"] for a in receiver.pushes[3]}


def test_a_failed_push_backs_off_doubling_and_a_success_resets_it(receiver: Receiver) -> None:
    push = AlertmanagerPush(receiver.url, resend_ms=60_000, max_per_push=500, tick_ms=5_000)
    receiver.status = 500
    waits = stale(3)

    attempts, held = [], []
    for s in range(0, 160, 5):  # a tick every 5 s
        before = len(receiver.pushes)
        push.push(waits, NOW + s * 1000)
        held.append(push.held_back)
        if len(receiver.pushes) > before:
            attempts.append(s)
    receiver.status = 200
    push.push(waits, NOW + 310_000)  # the fifth failure's back-off (160 s) is over
    push.push(waits, NOW + 315_000)  # nothing due: no push

    assert [0, 10, 30, 70, 150] == attempts  # after waits of 10, 20, 40 and 80 s
    assert {3} == set(held)  # every alert held back while Alertmanager fails
    assert [3] * 6 == [len(p) for p in receiver.pushes]
    assert (5, 0, 0) == (push.failures, push.in_a_row, push.held_back)


def test_the_back_off_doubles_up_to_five_minutes(receiver: Receiver) -> None:
    push = AlertmanagerPush(receiver.url, resend_ms=60_000, tick_ms=5_000)
    receiver.status = 503

    waits, at = [], NOW
    for _ in range(8):
        push.push(stale(1), at)
        waits.append((push.retry_at - at) // 1000)
        at = push.retry_at

    assert [10, 20, 40, 80, 160, 300, 300, 300] == waits


def test_a_long_request_id_is_cut_in_its_label_and_summary_with_a_hash(
    receiver: Receiver,
) -> None:
    push = AlertmanagerPush(receiver.url, resend_ms=60_000)
    a, b = ("t" * 10_000 + "/a", "t" * 10_000 + "/b")
    waits = [replace(stale(1)[0], request_id=rid) for rid in (a, b)]

    push.push(waits, NOW)

    labels = [x["labels"]["requestId"] for x in receiver.pushes[0]]
    assert [128, 128] == [len(v) for v in labels]
    assert labels[0] != labels[1]
    assert all(v.startswith("t" * 115 + "\N{HORIZONTAL ELLIPSIS}") for v in labels)
    summaries = [x["annotations"]["summary"] for x in receiver.pushes[0]]
    assert [f"{v} is STALE" for v in labels] == summaries
    assert max(receiver.sizes) < 2_000


def test_a_wait_on_unreported_evidence_is_a_ticket_to_the_operator_after_the_pages(
    receiver: Receiver,
) -> None:
    push = AlertmanagerPush(receiver.url, resend_ms=60_000, tick_ms=TICK)
    unrouted = replace(
        stale(1)[0],
        request_id="never-routed",
        state="UNROUTABLE",
        owner="policy_owner",
        since=NOW - 7_200_000,  # older than the page: it would go first if it were a page
        next_move=uncertain_move((Missing.ROUTE,)),
        unreported="route",
    )
    failed = replace(stale(1)[0], request_id="failed", state="UNROUTABLE", owner="policy_owner")

    push.push([unrouted, failed], NOW)

    first, second = receiver.pushes[0]
    assert ("failed", "critical", "policy_owner") == (
        first["labels"]["requestId"],
        first["labels"]["severity"],
        first["labels"]["owner"],
    )
    assert "evidence" not in first["labels"]
    assert {
        "requestId": "never-routed",
        "state": "UNROUTABLE",
        "severity": "warning",
        "owner": "sidewatch_operator",
        "evidence": "unreported",
        "missing": "route",
    } == {k: v for k, v in second["labels"].items() if k not in ("alertname", "policy")}
    notes = second["annotations"]
    assert notes["summary"].endswith("is UNROUTABLE (uncertain: never reported: route)")
    assert notes["nextMove"].startswith("Uncertain: never reported (route).")
    assert "policy_owner" == notes["stateOwner"]


def test_with_an_external_url_each_alert_links_to_its_wait_page_runbook_and_dashboard(
    alertmanager: str, tmp_path: Path, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tests.daemon.test_e2e as e2e  # noqa: PLC0415

    port = _free_port()
    monkeypatch.setattr(e2e, "_free_port", lambda: port)
    extra = (
        f"alertmanager: {{url: '{alertmanager}', resendInterval: 2s, "
        f"dashboardUrl: '{DASHBOARD}'}}\n"
    )
    server = _start(
        tmp_path, db_url, extra=extra, server=f", externalUrl: 'http://127.0.0.1:{port}/'"
    )
    try:
        body, _ = _seed_relative_to_now()
        httpx.post(
            f"{server.url}/v1/events",
            content=body,
            headers={"content-type": "application/x-ndjson"},
        )
        active = _until(lambda: len(_active(alertmanager)) == 4 and _active(alertmanager))
        link = active["thread-deploy/int-deploy"]["generatorURL"]
        page = httpx.get(link)
        notes = {k: a["annotations"] for k, a in active.items()}
        runbooks = {k: httpx.get(n["runbook_url"]).status_code for k, n in notes.items()}
    finally:
        _stop(server)

    assert f"http://127.0.0.1:{port}/ui/waits/thread-deploy%2Fint-deploy" == link
    assert 200 == page.status_code
    assert "<code>thread-deploy/int-deploy</code>" in page.text
    assert "STUCK_AFTER_DECISION" in page.text and "Next safe move:" in page.text
    assert {
        k: f"http://127.0.0.1:{port}/runbooks/{name}.md"
        for k, name in (
            ("thread-delete/int-delete", "stale"),
            ("thread-rotation/int-rotation", "unroutable"),
            ("thread-invoice/int-invoice", "orphaned"),
            ("thread-deploy/int-deploy", "stuck-after-decision"),
        )
    } == {k: n["runbook_url"] for k, n in notes.items()}
    assert {200} == set(runbooks.values())
    assert {DASHBOARD} == {n["dashboard_url"] for n in notes.values()}


def test_each_alert_names_its_states_runbook_and_a_ticket_on_unreported_evidence_its_own(
    receiver: Receiver,
) -> None:
    push = AlertmanagerPush(receiver.url, resend_ms=60_000, tick_ms=TICK)
    waits = [
        replace(stale(1)[0], request_id=state, state=state)
        for state in ("STALE", "UNROUTABLE", "ORPHANED", "STUCK_AFTER_DECISION")
    ]
    ticket = replace(waits[1], request_id="never-routed", unreported="route")

    push.push([*waits, ticket], NOW)

    assert {
        "STALE": "/runbooks/stale.md",
        "UNROUTABLE": "/runbooks/unroutable.md",
        "ORPHANED": "/runbooks/orphaned.md",
        "STUCK_AFTER_DECISION": "/runbooks/stuck-after-decision.md",
        "never-routed": "/runbooks/evidence-unreported.md",
    } == {a["labels"]["requestId"]: a["annotations"]["runbook_url"] for a in receiver.pushes[0]}
    assert not any("dashboard_url" in a["annotations"] for a in receiver.pushes[0])


def test_every_runbook_an_alert_can_name_is_one_the_daemon_serves() -> None:
    served = {p.name for p in RUNBOOKS.glob("*.md")}
    named = {
        str(runbook_path(state, unreported)).removeprefix("/runbooks/")
        for state in SEVERITY
        for unreported in (False, True)
    }

    assert named <= served
    assert len(named) == 5


def _recipe() -> str:
    """The inhibition recipe exactly as docs/alerting.md prints it."""
    text = (ROOT / "docs" / "alerting.md").read_text()
    blocks = re.findall(r"```yaml\n# alertmanager.yml\n(.*?)```", text, flags=re.S)
    assert 1 == len(blocks)
    return str(blocks[0])


EXTERNAL = "https://sw.example"


def _rule_alert(name: str, policy: str) -> dict[str, Any]:
    """The alert Prometheus sends for rule `name`, with the labels of the rules
    `sidewatch rules --external-url` writes and their (absolute) runbook_url."""
    rules = yaml.safe_load(mixin.rules(external_url=EXTERNAL))["groups"]
    rule = next(r for g in rules for r in g["rules"] if r.get("alert") == name)
    runbook = rule["annotations"]["runbook_url"]
    return {
        "labels": {"alertname": name, "policy": policy, **rule["labels"]},
        "annotations": {"runbook_url": runbook},
    }


def test_the_documented_inhibition_keeps_one_page_per_wait_with_its_runbook(
    tmp_path: Path,
) -> None:
    for url in _alertmanager(tmp_path, _recipe()):
        push = AlertmanagerPush(url, resend_ms=60_000, external_url=EXTERNAL)
        deploy = ProblemWait(
            "thread-deploy/int-deploy",
            "STUCK_AFTER_DECISION",
            "runtime_owner",
            "default",
            NOW - 60_000,
            "Investigate.",
            "{}",
            "{}",
        )
        push.push([deploy], int(time.time() * 1000))
        rule_alerts = [
            _rule_alert("SidewatchStuckAfterDecision", "default"),
            _rule_alert("SidewatchStuckAfterDecision", "prod"),  # no per-wait alert there
        ]
        httpx.post(f"{url}/api/v2/alerts", json=rule_alerts).raise_for_status()

        def states(url: str = url) -> dict[tuple[str, str], str]:
            alerts = httpx.get(f"{url}/api/v2/alerts").json()
            return {
                (a["labels"]["alertname"], a["labels"]["policy"]): a["status"]["state"]
                for a in alerts
            }

        seen = _until(
            lambda: len(states()) == 3 and "unprocessed" not in states().values() and states()
        )
        delivered = {
            (a["labels"]["alertname"], a["labels"]["policy"]): a["annotations"].get("runbook_url")
            for a in httpx.get(f"{url}/api/v2/alerts", params={"inhibited": "false"}).json()
        }

    assert {
        ("SidewatchWait", "default"): "active",
        ("SidewatchStuckAfterDecision", "default"): "suppressed",
        ("SidewatchStuckAfterDecision", "prod"): "active",
    } == seen
    # What is delivered, on either side of the inhibition, links its runbook.
    assert {
        ("SidewatchWait", "default"): f"{EXTERNAL}/runbooks/stuck-after-decision.md",
        ("SidewatchStuckAfterDecision", "prod"): f"{EXTERNAL}/runbooks/stuck-after-decision.md",
    } == delivered
