"""A long re-audit never makes the daemon unready or holds ingest up: each tick works under a
time budget, commits its slice and leaves the rest for the next, saying how much is left
(`sidewatch_audit_backlog_threads`); tick by tick the backlog goes down to 0, and the verdicts
at the end are those one unbounded pass gives, each transition recorded once."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
import warnings
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sidewatch.app.audit import audit
from sidewatch.config import Config
from sidewatch.core.policy import DEFAULT_POLICY
from sidewatch.daemon.serve import Daemon
from tests.daemon.test_http import MIN, NDJSON, heartbeat, ndjson, requested, route

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette's TestClient prefers httpx2 (see test_http)
    from starlette.testclient import TestClient

THREADS = 450  # a budgeted tick takes 100 at least (app.audit.MIN_BATCH)
# heartbeatFreshness down from 10 to 5 minutes: every wait, its heartbeat 8 minutes old, goes
# from WAITING to ORPHANED once re-audited.
STRICT = dataclasses.replace(
    DEFAULT_POLICY,
    thresholds=dataclasses.replace(DEFAULT_POLICY.thresholds, heartbeat_freshness_ms=5 * MIN),
)


@pytest.fixture
def daemon(db_url: str) -> Iterator[Daemon]:
    d = Daemon(dataclasses.replace(Config(), db_url=db_url, allowed_hosts=("testserver",)))
    yield d
    d.engine.dispose()


def _waits(now: int, count: int) -> bytes:
    lines = []
    for n in range(count):
        thread = f"t-{n:04d}"
        lines += requested(thread, "i", "deploy_service", now - 30 * MIN, now + 90 * MIN)
        lines += [route(thread, "i", now - 29 * MIN), heartbeat(thread, now - 8 * MIN)]
    return ndjson(lines)


def _backlog(client: TestClient) -> float:
    text = client.get("/metrics").text
    (value,) = (
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "sidewatch_audit_backlog_threads"
    )
    return value


def test_a_long_reaudit_goes_on_tick_by_tick_and_the_daemon_stays_ready_and_ingests(
    daemon: Daemon,
) -> None:
    client = TestClient(daemon.app)
    now = int(time.time()) * 1000
    extra = ndjson(requested("t-extra", "i", "send_invoice", now - MIN, now + 90 * MIN))
    for body in (_waits(now, THREADS), extra):
        assert 200 == client.post("/v1/events", content=body, headers=NDJSON).status_code
    asyncio.run(daemon.tick())  # the whole budget of a 30 s interval: every wait, WAITING
    before = dict(daemon.auditor.open_waits)
    moved_before = daemon.auditor.transitions.copy()
    daemon.auditor.use_policies((STRICT,))  # what a SIGHUP with the new policy does
    daemon.tick_budget_s = 0.001  # one batch a tick
    answers: list[tuple[str, int]] = []
    done = threading.Event()

    def meanwhile() -> None:  # ingest and readiness, asked while the ticks run
        other = TestClient(daemon.app)
        while not done.is_set():
            answers.append(("readyz", other.get("/readyz").status_code))
            posted = other.post("/v1/events", content=extra, headers=NDJSON)  # redelivered
            answers.append(("ingest", posted.status_code))

    asker = threading.Thread(target=meanwhile)
    asker.start()
    backlogs = []
    try:
        for _ in range(THREADS):
            asyncio.run(daemon.tick())
            backlogs.append(_backlog(client))
            if backlogs[-1] == 0:
                break
    finally:
        done.set()
        asker.join()
    final = audit(daemon.store, (STRICT,), now)
    stored = daemon.auditor.state.records([f"t-{n:04d}" for n in range(THREADS)])

    assert {("WAITING", "default"): THREADS + 1} == {k: v for k, v in before.items() if v}
    assert [351, 251, 151, 51, 0] == backlogs  # t-extra's wait is re-audited too
    assert {("readyz", 200), ("ingest", 200)} == set(answers)
    assert 200 == client.get("/readyz").status_code
    assert {
        (a.evidence.thread_id, a.evidence.request_id): (a.verdict.state.value, a.verdict.since)
        for a in final
        if a.evidence.thread_id != "t-extra"
    } == {key: (s.state, s.since) for key, s in stored.items()}
    assert {"ORPHANED"} == {s.state for s in stored.values()}
    moved = daemon.auditor.transitions - moved_before
    assert {("WAITING", "ORPHANED"): THREADS} == dict(moved)  # each wait's, once


def test_budgeted_ticks_go_on_round_the_ring_so_new_evidence_never_jumps_the_queue(
    daemon: Daemon,
) -> None:
    """Each budgeted tick takes one batch of 100 (budget 0). New evidence for a thread the
    first tick took does not put it before the threads still waiting: the next tick goes on
    after the last one taken, and it is taken again only when the ring comes round."""
    client = TestClient(daemon.app)
    now = int(time.time()) * 1000
    names = [f"t-{n:04d}" for n in range(250)]
    client.post("/v1/events", content=_waits(now, len(names)), headers=NDJSON)
    daemon.auditor.tick(now)
    daemon.auditor.use_policies((STRICT,))
    taken: list[list[str]] = []

    def tick(at: int) -> None:
        daemon.auditor.tick(at, budget_s=0)
        records = daemon.auditor.state.records(names)
        taken.append(sorted(t for (t, _), s in records.items() if s.evaluated_at == at))

    tick(now + 1)
    client.post("/v1/events", content=ndjson([heartbeat("t-0000", now)]), headers=NDJSON)
    tick(now + 2)
    tick(now + 3)
    tick(now + 4)

    assert names[:100] == taken[0]
    assert names[100:200] == taken[1]
    assert [*names[:1], *names[200:]] == taken[2]  # round the ring: t-0000's new heartbeat
    assert [] == taken[3]
    assert 0 == daemon.auditor.backlog


def test_a_budgeted_tick_takes_the_longest_overdue_threads_first(daemon: Daemon) -> None:
    """150 waits whose expiry (their next change) comes in the reverse of their threads'
    order; after all expired, a tick of one batch (100) takes the 100 that expired first."""
    client = TestClient(daemon.app)
    now = int(time.time()) * 1000
    names = [f"t-{n:04d}" for n in range(150)]
    lines = []
    for n, thread in enumerate(names):
        expires = now + 5 * MIN + (len(names) - n) * 1000  # t-0149 first, t-0000 last
        lines += requested(thread, "i", "deploy_service", now - MIN, expires)
        lines += [route(thread, "i", now - MIN), heartbeat(thread, now)]
    client.post("/v1/events", content=ndjson(lines), headers=NDJSON)
    daemon.auditor.tick(now)
    later = now + 20 * MIN

    daemon.auditor.tick(later, budget_s=0)
    records = daemon.auditor.state.records(names)

    taken = sorted(t for (t, _), s in records.items() if s.evaluated_at == later)
    assert names[50:] == taken
    assert 50 == daemon.auditor.backlog
    assert {"STALE"} == {s.state for (t, _), s in records.items() if t in taken}


def test_a_reaudit_longer_than_three_intervals_never_fails_readyz_under_the_scheduler(
    db_url: str,
) -> None:
    """The issue's run, scaled down: the daemon's own scheduler ticks every 100 ms (its
    /readyz window three intervals, 0.3 s) and a policy change re-audits waits that take
    longer than that (about 0.5 s in one unbounded tick on SQLite, more on PostgreSQL).
    Every /readyz asked meanwhile is 200 on the replica auditing (an unbounded tick made
    them 503 once it outlasted three intervals), and the backlog comes down to 0."""
    config = dataclasses.replace(
        Config(), db_url=db_url, allowed_hosts=("testserver",), audit_interval_ms=100
    )
    daemon = Daemon(config)
    now = int(time.time()) * 1000
    try:
        body = _waits(now, 3000)
        assert (
            200
            == TestClient(daemon.app).post("/v1/events", content=body, headers=NDJSON).status_code
        )
        daemon.auditor.tick(now)
        daemon.auditor.succeeded(time.time())
        daemon.auditor.use_policies((STRICT,))
        ready: list[tuple[int, bool]] = []
        with TestClient(daemon.app) as client:  # the lifespan: the scheduler runs the ticks
            started = time.monotonic()
            while True:
                answer = client.get("/readyz")
                ready.append((answer.status_code, answer.json()["auditLease"]))
                snapshot = daemon.auditor.snapshot  # what the gauge serves, with its tick
                if snapshot.ticks > 1 and snapshot.audit_backlog == 0:
                    break
                assert time.monotonic() - started < 120, "the re-audit never finished"
                time.sleep(0.02)
            took = time.monotonic() - started
            backlog = _backlog(client)
    finally:
        daemon.engine.dispose()

    assert took > 3 * 0.1, took  # longer than the window: one unbounded tick failed /readyz
    assert {(200, True)} == set(ready)
    assert 0 == backlog
    assert {("ORPHANED", "default"): 3000} == {
        k: v for k, v in daemon.auditor.open_waits.items() if v
    }
