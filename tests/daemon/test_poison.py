"""Times out of any calendar's range, already in a store (written before ingest checked them,
or by hand), on SQLite and PostgreSQL: the auditor, the read API, readiness, the Alertmanager
push and every report format go on for every other wait; a wait whose recording raises is
logged, counted and retried while the rest of its tick is saved."""

from __future__ import annotations

import dataclasses
import logging
import time
import warnings
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import orjson
import pytest
from click.testing import CliRunner
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sidewatch.app import audit as pipeline_module
from sidewatch.app import read as waits_module
from sidewatch.app import transitions as recording_module
from sidewatch.app.audit import Auditor
from sidewatch.cli.main import cli
from sidewatch.config import Config
from sidewatch.core.facts import (
    HeartbeatFact,
    InterruptFact,
    RunFact,
    RunMark,
    SignalFact,
    SignalKind,
)
from sidewatch.core.health import Replay
from sidewatch.core.model import Code
from sidewatch.daemon.serve import Daemon
from sidewatch.exporters.alertmanager import SEVERITY
from sidewatch.exporters.otel import WaitSpans
from sidewatch.report.verdicts import audit_table, iso
from sidewatch.store.repo import Store
from tests.daemon.test_http import EXPECTED_STATES, MIN, NDJSON, ndjson, scenario
from tests.exporters.test_alertmanager import _active, _until, alertmanager  # noqa: F401

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette's TestClient falls back to httpx (see test_http)
    from starlette.testclient import TestClient

PAST = -(10**14)  # "timestamp": -1e14, the year -1199
FUTURE = 10**17  # "timestamp": 1e17, beyond the year 9999
YEAR_ONE = -62_135_596_800_000 - 14 * 3_600_000  # "0001-01-01T00:00:00+14:00"
POISONED = {
    "t-past/i-past": "requested in the year -1199",
    "t-year-one/i-year-one": "expires before the year 1",
    "t-future/i-future": "a heartbeat after the year 9999",
}


def poison(store: Store, now: int) -> None:
    """Three waits with times no calendar shows, written straight into the store: no ingest
    check stands between them and the auditor."""
    facts: list[Any] = []
    for seq, (thread, at, expires, beat) in enumerate(
        [
            ("t-past", PAST, None, None),
            ("t-year-one", now - 5 * MIN, YEAR_ONE, None),
            ("t-future", now - 5 * MIN, FUTURE, FUTURE),
        ]
    ):
        run, interrupt = f"r-{thread[2:]}", f"i-{thread[2:]}"
        facts += [
            RunFact(run_id=run, thread_id=thread, mark=RunMark.STARTED, at=at, seq=3 * seq),
            RunFact(run_id=run, thread_id=thread, mark=RunMark.INTERRUPTED, at=at, seq=3 * seq + 1),
            InterruptFact(
                thread_id=thread,
                run_id=run,
                interrupt_id=interrupt,
                at=at,
                seq=3 * seq + 1,
                reason="tool_call",
                expires_at=expires,
            ),
        ]
        if beat is not None:
            facts.append(
                HeartbeatFact(
                    thread_id=thread, at=beat, seq=3 * seq + 2, run_id=run, handle=True, key=thread
                )
            )
    with store.unit("poison", now) as writer:
        assert writer is not None
        writer.write(facts, [], {}, len(facts), 0)


@pytest.fixture
def now() -> int:
    return int(time.time()) * 1000  # the read API and Alertmanager go by the clock


@pytest.fixture
def alertmanager_url(request: pytest.FixtureRequest) -> str:
    """A real Alertmanager (test_alertmanager's), which refuses a push holding a bad alert."""
    return str(request.getfixturevalue("alertmanager"))


@pytest.fixture
def daemon(db_url: str, alertmanager_url: str, now: int) -> Iterator[Daemon]:
    """A daemon holding the six reference waits and the three poisoned ones, pushing to a
    real Alertmanager."""
    config = dataclasses.replace(
        Config(),
        db_url=db_url,
        alertmanager_url=alertmanager_url,
        allowed_hosts=("testserver",),  # TestClient's Host, refused unless named
    )
    made = Daemon(config)
    client = TestClient(made.app)
    posted = client.post("/v1/events", content=ndjson(scenario(now)), headers=NDJSON)
    assert 200 == posted.status_code
    poison(made.store, now)
    yield made
    made.engine.dispose()


def test_a_tick_over_poisoned_times_completes_and_audits_every_other_wait(
    daemon: Daemon, alertmanager_url: str, now: int
) -> None:
    report = daemon._audit(now)

    assert 0 == report.errors
    assert daemon.auditor.last_success is not None
    assert EXPECTED_STATES == {k: v for k, v in saved(daemon).items() if k in EXPECTED_STATES}
    problems = {rid for rid, s in EXPECTED_STATES.items() if s in SEVERITY}
    url = alertmanager_url
    pushed = _until(lambda: problems <= set(_active(url)) and _active(url))
    active = set(pushed or {})
    # Expired before the year 1, and still an alert: Alertmanager starts it on receipt.
    assert problems | {"t-year-one/i-year-one"} <= active


DEPLOY_ID = "thread-deploy/int-deploy"


def saved(daemon: Daemon) -> dict[str, str]:
    """The state the auditor last saved for each wait."""
    states = {*EXPECTED_STATES.values(), "WAITING", "CLOSED_BY_DECLINE"}
    return {
        rid: state for state in states for rid, _ in daemon.auditor.state.select([state], 10_000)
    }


def test_the_read_api_and_readiness_answer_with_poisoned_times(daemon: Daemon, now: int) -> None:
    daemon._audit(now)
    client = TestClient(daemon.app)

    listed = client.get("/v1/waits?limit=10000")
    details = {rid: client.get(f"/v1/waits/{quote(rid, safe='')}") for rid in POISONED}

    assert 200 == client.get("/readyz").status_code
    assert 200 == listed.status_code, listed.text
    assert set(EXPECTED_STATES) <= {w["requestId"] for w in listed.json()["waits"]}
    assert {rid: 200 for rid in POISONED} == {rid: r.status_code for rid, r in details.items()}
    timeline = details["t-future/i-future"].json()["timeline"]
    assert f"out of range ({FUTURE} ms)" in [item["at"] for item in timeline]


@pytest.mark.parametrize(
    "command",
    [["report", "--format", f] for f in ("md", "html", "json")]
    + [["audit", "--format", f] for f in ("table", "json")],
    ids=" ".join,
)
def test_every_report_and_audit_format_is_printed_with_poisoned_times(
    daemon: Daemon, now: int, command: list[str]
) -> None:
    result = CliRunner().invoke(cli, [*command, "--db", daemon.config.db_url, "--at", iso(now)])

    assert (0, None) == (result.exit_code, result.exception), result.output
    assert "Traceback" not in result.output
    assert "out of range (" in result.output  # a poisoned time, shown as its number


def test_the_audit_table_shows_a_time_out_of_range_as_its_number() -> None:
    assert "out of range (-100000000000000 ms)" == iso(PAST)
    assert "out of range (100000000000000000 ms)" == iso(FUTURE)
    assert "9999-12-31T23:59:59.999Z" == iso(253_402_300_799_999)
    assert "0001-01-01T00:00:00Z" == iso(-62_135_596_800_000)
    assert audit_table(FUTURE, []).startswith(f"Audit at out of range ({FUTURE} ms)")


# -- a wait whose recording raises ------------------------------------------------------------


def test_a_wait_whose_recording_raises_is_counted_and_retried_and_the_rest_is_saved(
    daemon: Daemon, now: int, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real = recording_module.evidence_json

    def failing(v: Any) -> dict[str, Any]:
        if v.request_id == DEPLOY_ID:
            raise ValueError("cannot serialize")
        return real(v)

    monkeypatch.setattr(recording_module, "evidence_json", failing)
    with caplog.at_level(logging.ERROR, logger="sidewatch.auditor"):
        first = daemon.auditor.tick(now)
    after_first = saved(daemon)
    counted = daemon.auditor.snapshot.audit_errors
    open_deploy = daemon.auditor.open_waits[("STUCK_AFTER_DECISION", "default")]
    monkeypatch.setattr(recording_module, "evidence_json", real)
    second = daemon.auditor.tick(now + MIN)

    assert (1, 1) == (first.errors, counted)
    assert DEPLOY_ID in caplog.text and "could not be recorded" in caplog.text
    assert set(EXPECTED_STATES) - {DEPLOY_ID} <= set(after_first)
    assert DEPLOY_ID not in after_first
    assert 0 == open_deploy  # nothing of the failed wait was counted
    assert 0 == second.errors
    assert "STUCK_AFTER_DECISION" == saved(daemon)[DEPLOY_ID]
    assert 1 == daemon.auditor.open_waits[("STUCK_AFTER_DECISION", "default")]
    recorded = [t.to_state for t in daemon.auditor.state.transitions_of(DEPLOY_ID)]
    assert ("WAITING", "STUCK_AFTER_DECISION") == (recorded[0], recorded[-1])


def test_a_closed_wait_whose_times_no_span_carries_is_counted_and_the_other_spans_written(
    daemon: Daemon, now: int
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    decline = SignalFact(
        kind=SignalKind.DECISION,
        at=PAST + 1000,
        seq=1,
        request_id=None,
        thread_id="t-past",
        interrupt_id="i-past",
        code=Code.DECLINE,
        key="d",
    )
    with daemon.store.unit("decline", now) as writer:
        assert writer is not None
        writer.write([decline], [], {}, 1, 0)
    spans = WaitSpans(provider.get_tracer("t"))
    auditor = Auditor(daemon.store, daemon.config.policies, on_closed=spans.on_closed)

    report = auditor.tick(now)

    assert 1 == report.errors
    assert ["thread-message/int-message"] == [
        s.attributes["sidewatch.approval.request_id"]  # type: ignore[index]
        for s in exporter.get_finished_spans()
    ]
    assert all(s.to_json() for s in exporter.get_finished_spans())  # what the console prints


# -- one wait that cannot be shown never fails a list or a report -----------------------------


def classify_failing_for(module: Any, request_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The health model raises for one wait, as a bug would, wherever `module` asks the
    engine for its verdict (the engine's pass replays every wait: the fault is put there)."""
    real = Replay.verdict

    def verdict(self: Replay, now: int) -> Any:
        if self.ev.request_id == request_id:
            raise ArithmeticError("a model bug")
        return real(self, now)

    monkeypatch.setattr(Replay, "verdict", verdict)


def test_a_wait_that_cannot_be_classified_is_left_out_of_the_list(
    daemon: Daemon, now: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    daemon._audit(now)
    classify_failing_for(waits_module, DEPLOY_ID, monkeypatch)

    listed = TestClient(daemon.app).get("/v1/waits?limit=10000")

    assert 200 == listed.status_code
    shown = {w["requestId"] for w in listed.json()["waits"]}
    assert set(EXPECTED_STATES) - {DEPLOY_ID} <= shown
    assert DEPLOY_ID not in shown


def test_a_wait_that_cannot_be_classified_is_left_out_of_the_report(
    daemon: Daemon, now: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    classify_failing_for(pipeline_module, DEPLOY_ID, monkeypatch)

    result = CliRunner().invoke(
        cli, ["report", "--db", daemon.config.db_url, "--at", iso(now) or "", "--format", "json"]
    )

    assert (0, None) == (result.exit_code, result.exception)
    problems = {w["requestId"] for w in orjson.loads(result.stdout)["problemWaits"]}
    assert "thread-delete/int-delete" in problems
    assert DEPLOY_ID not in problems
