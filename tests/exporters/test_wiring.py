"""examples/prometheus.yml and examples/alertmanager.yml, run as copied by a real Prometheus and
a real Alertmanager in front of a real `sidewatch serve` pushing its per-wait alerts: a STUCK
wait reaches the runtime owner's webhook with its wait page and its runbook (both served), the
rule alert of its state is muted by the documented inhibition, and its resolution arrives.

What is substituted in the files, and nothing else: in prometheus.yml the addresses
127.0.0.1:9477 (sidewatch) and 127.0.0.1:9093 (Alertmanager) by the test's own; in
alertmanager.yml the webhook base URL http://127.0.0.1:5001 by the test's receiver. The rule
file prometheus.yml loads is `sidewatch rules --external-url <sidewatch's URL>`, written where
the file names it (rules/sidewatch.rules.yml beside it)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from click.testing import CliRunner

import tests.daemon.test_e2e as e2e
from sidewatch.cli.main import cli
from tests.daemon.test_e2e import _seed_relative_to_now, _start, _stop
from tests.exporters.test_alertmanager import _recipe
from tests.ports import free_port
from tests.realprom import RealPrometheus

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
UNPACKED = ROOT / ".tools" / "alertmanager" / "usr" / "bin" / "prometheus-alertmanager"
DEPLOY = "thread-deploy/int-deploy"
# group_wait 30s, group_interval 1m in the example; 15 s scrapes and evaluations.
FIRING_SECONDS, RESOLVED_SECONDS = 90.0, 150.0


class Webhook:
    """A receiver of Alertmanager's webhook notifications: (path, payload) of each."""

    def __init__(self) -> None:
        self.got: list[tuple[str, dict[str, Any]]] = []
        got = self.got

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                got.append((self.path, json.loads(body)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *_: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def alerts(self, path: str, status: str) -> list[dict[str, Any]]:
        """Every alert notified to `path` with `status` (firing, resolved)."""
        return [
            a for p, n in list(self.got) if p == path for a in n["alerts"] if a["status"] == status
        ]


def until(fn: Callable[[], Any], seconds: float) -> Any:
    deadline = time.monotonic() + seconds
    while not (value := fn()) and time.monotonic() < deadline:
        time.sleep(0.5)
    return value


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    hook = Webhook()
    yield hook
    hook.server.shutdown()
    hook.server.server_close()


def start_alertmanager(workdir: Path, config: Path) -> tuple[str, subprocess.Popen[bytes]]:
    binary = os.environ.get("SIDEWATCH_ALERTMANAGER") or str(UNPACKED)
    if not Path(binary).is_file():
        pytest.fail(f"Alertmanager not found at {binary}: `make test` unpacks it")
    port = free_port()
    with (workdir / "alertmanager.log").open("wb") as log:  # the child keeps its own
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.path={workdir / 'am'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--cluster.listen-address=",
            ],
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        try:
            return httpx.get(f"{url}/-/ready", timeout=1).status_code == 200
        except httpx.TransportError:
            return proc.poll() is not None  # ended: stop waiting, the assertion says why

    until(ready, 20)
    assert proc.poll() is None, (workdir / "alertmanager.log").read_text()
    return url, proc


def copied(name: str, into: Path, **replace: str) -> Path:
    """examples/`name` written into `into`, each key of `replace` (which must occur) replaced."""
    text = (EXAMPLES / name).read_text()
    for old, new in replace.items():
        assert old in text, f"{name} no longer names {old}"
        text = text.replace(old, new)
    (into / name).write_text(text)
    return into / name


def rule_alert_states(am: str, name: str) -> dict[str, str]:
    """policy -> state (active, suppressed) of the rule alert `name` Prometheus sent."""
    alerts = httpx.get(f"{am}/api/v2/alerts").json()
    return {
        a["labels"]["policy"]: a["status"]["state"]
        for a in alerts
        if a["labels"]["alertname"] == name
    }


def test_a_stuck_wait_reaches_its_owners_webhook_with_both_links_and_then_its_resolution(
    tmp_path: Path, db_url: str, webhook: Webhook, monkeypatch: pytest.MonkeyPatch
) -> None:
    am_dir, prom_dir = tmp_path / "alertmanager", tmp_path / "prometheus"
    (prom_dir / "rules").mkdir(parents=True)
    am_dir.mkdir()
    am_config = copied("alertmanager.yml", am_dir, **{"http://127.0.0.1:5001": webhook.url})
    am, am_proc = start_alertmanager(am_dir, am_config)
    port = free_port()
    monkeypatch.setattr(e2e, "_free_port", lambda: port)
    sidewatch_url = f"http://127.0.0.1:{port}"
    server = _start(
        tmp_path,
        db_url,
        extra=f"alertmanager: {{url: '{am}', resendInterval: 5s}}\n",
        server=f", externalUrl: '{sidewatch_url}'",
    )
    rules = CliRunner().invoke(cli, ["rules", "--external-url", sidewatch_url])
    assert 0 == rules.exit_code, rules.output
    (prom_dir / "rules" / "sidewatch.rules.yml").write_text(rules.output)
    prom_config = copied(
        "prometheus.yml",
        prom_dir,
        **{"127.0.0.1:9477": f"127.0.0.1:{port}", "127.0.0.1:9093": am.removeprefix("http://")},
    )
    prometheus = RealPrometheus.from_file(prom_dir, prom_config)
    try:
        prometheus.start()
        body, _ = _seed_relative_to_now()
        posted = httpx.post(
            f"{sidewatch_url}/v1/events",
            content=body,
            headers={"content-type": "application/x-ndjson"},
        )
        assert 200 == posted.status_code

        def stuck(status: str) -> list[dict[str, Any]]:
            return [
                a
                for a in webhook.alerts("/runtime-oncall", status)
                if a["labels"].get("requestId") == DEPLOY
            ]

        firing = until(lambda: stuck("firing"), FIRING_SECONDS)
        assert firing, f"no STUCK wait at the runtime owner's webhook: {webhook.got}"
        page, runbook = firing[0]["generatorURL"], firing[0]["annotations"]["runbook_url"]
        pages = httpx.get(page).status_code, httpx.get(runbook).status_code
        # Prometheus evaluated the rules from the example and sent the rule alert: muted.
        muted = until(
            lambda: (
                rule_alert_states(am, "SidewatchStuckAfterDecision").get("default") == "suppressed"
            ),
            FIRING_SECONDS,
        )
        # one group_wait (30s) later the rule alert would have been notified, were it not muted
        time.sleep(35)
        firing_alerts = {(p, a["labels"]["alertname"]) for p, n in webhook.got for a in n["alerts"]}
        rule_states = prometheus.alerts()

        receipt = {
            "type": "CUSTOM",
            "name": "sidewatch.receipt",
            "value": {"threadId": "thread-deploy", "interruptId": "int-deploy"},
        }
        httpx.post(
            f"{sidewatch_url}/v1/events",
            content=json.dumps(receipt).encode(),
            headers={"content-type": "application/x-ndjson"},
        )
        resolved = until(lambda: stuck("resolved"), RESOLVED_SECONDS)
    finally:
        prometheus.stop()
        _stop(server)
        am_proc.terminate()
        am_proc.wait(timeout=10)

    assert f"{sidewatch_url}/ui/waits/thread-deploy%2Fint-deploy" == page
    assert f"{sidewatch_url}/runbooks/stuck-after-decision.md" == runbook
    assert (200, 200) == pages
    assert ("critical", "runtime_owner", "STUCK_AFTER_DECISION") == (
        firing[0]["labels"]["severity"],
        firing[0]["labels"]["owner"],
        firing[0]["labels"]["state"],
    )
    assert muted, rule_alert_states(am, "SidewatchStuckAfterDecision")
    assert any(a["labels"]["alertname"] == "SidewatchStuckAfterDecision" for a in rule_states)
    # routed by severity and owner: each per-wait alert to its owner's receiver
    assert {
        ("/runtime-oncall", "SidewatchWait"),
        ("/policy-oncall", "SidewatchWait"),
        ("/owner-tickets", "SidewatchWait"),
    } <= firing_alerts
    # while the per-wait alert fires, the rule alert of its state is muted, not delivered
    assert not {a for p, a in firing_alerts if a == "SidewatchStuckAfterDecision"}
    assert resolved, f"the resolution never reached the webhook: {webhook.got[-3:]}"
    assert resolved[0]["generatorURL"] == page


def test_the_example_alertmanager_carries_the_documented_inhibition_and_routes() -> None:
    example = yaml.safe_load((EXAMPLES / "alertmanager.yml").read_text())
    recipe = yaml.safe_load(_recipe())
    routes = [tuple(r["matchers"]) for r in example["route"]["routes"]]

    assert recipe["inhibit_rules"] == example["inhibit_rules"]
    assert all(any(m.startswith("severity=") for m in r) for r in routes)
    assert all(any(m.startswith("owner=") for m in r) for r in routes)


def amtool() -> str:
    """amtool beside the Alertmanager `make test` unpacks (or SIDEWATCH_ALERTMANAGER's)."""
    alertmanager = Path(os.environ.get("SIDEWATCH_ALERTMANAGER") or str(UNPACKED))
    path = alertmanager.with_name("amtool")
    if not path.is_file():
        pytest.fail(f"amtool not found at {path}: `make test` unpacks it beside Alertmanager")
    return str(path)


@pytest.mark.parametrize(
    ("labels", "receiver"),
    [
        ({"severity": "critical", "owner": "runtime_owner"}, "runtime-oncall"),
        ({"severity": "critical", "owner": "policy_owner"}, "policy-oncall"),
        ({"severity": "critical", "owner": "platform"}, "platform-oncall"),
        ({"severity": "warning", "owner": "requester"}, "owner-tickets"),
        ({"severity": "warning", "owner": "runtime_owner"}, "owner-tickets"),
        ({"severity": "warning", "owner": "sidewatch_operator"}, "sidewatch-operator"),
        ({"severity": "warning", "owner": "platform"}, "sidewatch-operator"),
        ({"severity": "info", "owner": "approver"}, "approvers"),
    ],
    ids=lambda v: v if isinstance(v, str) else "/".join(v.values()),
)
def test_the_example_routes_each_severity_and_owner_to_its_receiver(
    labels: dict[str, str], receiver: str
) -> None:
    done = subprocess.run(
        [
            amtool(),
            "config",
            "routes",
            "test",
            f"--config.file={EXAMPLES / 'alertmanager.yml'}",
            *(f"{k}={v}" for k, v in labels.items()),
        ],
        capture_output=True,
        text=True,
        check=False,
    )

    assert (0, receiver) == (done.returncode, done.stdout.strip()), done.stderr
