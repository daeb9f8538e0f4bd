"""The tap reports liveness and durability: real agent processes (ag-ui-langgraph, a scripted fake
model, `TapMiddleware` installed in one line) and a real daemon with a short
`heartbeatFreshness`. Each scenario asserts the verdict, `uncertain`, and which alert rules the
daemon's exported metrics fire (`promtool test rules` over the rules' own expressions)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.daemon.test_e2e import Server, _start, _stop
from tests.rules.test_rules import RULES, alerts, promtool
from tests.tap.test_tap import _free_port, _wait, agent_input, interrupt_id_of

ROOT = Path(__file__).resolve().parents[2]
FRESHNESS_S = 3
TICK_S = 1  # the daemon's auditor interval (tests.daemon.test_e2e._start)
POLICY = f"""
policies:
  - name: default
    routeGrace: 1s
    heartbeatFreshness: {FRESHNESS_S}s
"""
PAGES = ("SidewatchOrphaned", "SidewatchUnroutable", "SidewatchStuckAfterDecision")
TICKET = "SidewatchEvidenceUnreported"


@pytest.fixture
def sidewatch(tmp_path: Path, db_url: str) -> Iterator[Server]:
    """A daemon per scenario: the alert rules read its gauges whole."""
    server = _start(tmp_path, db_url, extra=POLICY)
    yield server
    _stop(server)


class _Agent:
    """`tests.tap.live_agent` as a process of its own."""

    def __init__(self, sidewatch: Server, service: str, store: str, log: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # the checkout, and the tap's own source tree (its distribution, sidewatch-tap)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(ROOT), str(ROOT / "tap")))}
        with log.open("ab") as err:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.tap.live_agent",
                    str(self.port),
                    f"{sidewatch.url}/v1/events",
                    service,
                    store,
                ],
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/agent/health", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.1)
            if self.proc.poll() is not None:
                break
        self.proc.kill()
        raise AssertionError(f"the agent did not start:\n{log.read_text()}")

    def ask(self, thread: str) -> str:
        """Run the agent on `thread` until it asks for approval: the wait's requestId."""
        run = agent_input(thread, messages=[{"id": "u1", "role": "user", "content": "Go."}])
        answer = httpx.post(f"{self.url}/agent", json=run, timeout=60)
        assert 200 == answer.status_code, answer.text
        return f"{thread}/{interrupt_id_of(answer.text)}"

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


@pytest.fixture
def agents() -> Iterator[list[_Agent]]:
    started: list[_Agent] = []
    yield started
    for agent in started:
        if agent.proc.poll() is None:
            agent.kill()


def _samples(server: Server) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = httpx.get(f"{server.url}/metrics").text
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name in ("sidewatch_waits", "sidewatch_waits_unreported")
    }


def _firing(server: Server, tmp: Path, expected: dict[str, list[str]]) -> None:
    """The paging alerts and the unreported-evidence ticket fire for exactly `expected`
    (alert -> label sets), over the daemon's exported gauges."""
    exprs = {r["alert"]: " ".join(str(r["expr"]).split()) for r in alerts()}
    samples = _samples(server)
    assert samples, "the daemon exports its wait gauges"
    series = [
        {
            # as scraped: with the job the rules' default selector reads
            "series": f"{name}{{{','.join(f'{k}={json.dumps(v)}' for k, v in sorted(scraped))}}}",
            "values": f"{value:g}x5",
        }
        for (name, labels), value in sorted(samples.items(), key=str)
        for scraped in [labels | {("job", "sidewatch")}]
    ]
    tests = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "promql_expr_test": [
                    {
                        "expr": exprs[alert],
                        "eval_time": "1m",
                        "exp_samples": [
                            {"labels": labels, "value": 1} for labels in expected.get(alert, [])
                        ],
                    }
                    for alert in (*PAGES, TICKET)
                ],
            }
        ],
    }
    path = tmp / f"alerts-{uuid.uuid4().hex[:6]}.yml"
    path.write_text(yaml.safe_dump(tests))
    run = subprocess.run(
        [promtool(), "test", "rules", str(path)], capture_output=True, text=True, check=False
    )
    assert 0 == run.returncode, run.stdout + run.stderr


def _verdict(wait: dict) -> tuple[str, bool, list[str]]:
    return wait["state"], wait["uncertain"], wait["missing"]


def test_durable_and_alive_a_healthy_wait_stays_waiting_past_heartbeat_freshness(
    sidewatch: Server, agents: list[_Agent], tmp_path: Path
) -> None:
    agents.append(_Agent(sidewatch, "svc-a", str(tmp_path / "cp.sqlite"), tmp_path / "a.log"))
    request_id = agents[0].ask(f"live-{uuid.uuid4().hex[:8]}")
    _wait(sidewatch, request_id)

    time.sleep(2 * FRESHNESS_S + TICK_S)  # well past heartbeatFreshness since the request
    wait = _wait(sidewatch, request_id)

    assert ("WAITING", False, []) == _verdict(wait), wait
    assert wait["evidence"]["resumeHandle"]
    assert wait["evidence"]["lastHeartbeatAt"] > wait["evidence"]["requestedAt"]  # ISO, UTC
    _firing(sidewatch, tmp_path, {})  # no page, and no ticket: nothing is unreported


def test_in_memory_and_killed_its_wait_is_orphaned_within_freshness_and_a_tick(
    sidewatch: Server, agents: list[_Agent], tmp_path: Path
) -> None:
    agents.append(_Agent(sidewatch, "svc-m", "memory", tmp_path / "m.log"))
    request_id = agents[0].ask(f"live-{uuid.uuid4().hex[:8]}")
    assert ("WAITING", False, []) == _verdict(_wait(sidewatch, request_id))

    agents[0].kill()
    killed = time.monotonic()
    orphaned = _wait(sidewatch, request_id, "ORPHANED")
    seen = time.monotonic() - killed
    # The restarted process is another instance: it cannot resume the old in-memory run.
    agents.append(_Agent(sidewatch, "svc-m", "memory", tmp_path / "m.log"))
    time.sleep(FRESHNESS_S)  # its beats arrive, and the auditor ticks
    wait = _wait(sidewatch, request_id)

    assert seen <= FRESHNESS_S + TICK_S + 1  # + the poll's own interval and the request
    assert ("ORPHANED", False, []) == _verdict(orphaned), orphaned
    assert ("ORPHANED", False, []) == _verdict(wait), wait
    _firing(sidewatch, tmp_path, {"SidewatchOrphaned": ['{policy="default"}']})


def test_durable_and_restarted_its_wait_stays_waiting(
    sidewatch: Server, agents: list[_Agent], tmp_path: Path
) -> None:
    store = str(tmp_path / "cp.sqlite")
    agents.append(_Agent(sidewatch, "svc-d", store, tmp_path / "d.log"))
    request_id = agents[0].ask(f"live-{uuid.uuid4().hex[:8]}")
    _wait(sidewatch, request_id)

    agents[0].kill()
    agents.append(_Agent(sidewatch, "svc-d", store, tmp_path / "d.log"))
    time.sleep(2 * FRESHNESS_S + TICK_S)  # the old instance's beats alone would be stale
    wait = _wait(sidewatch, request_id)

    assert ("WAITING", False, []) == _verdict(wait), wait
    _firing(sidewatch, tmp_path, {})
