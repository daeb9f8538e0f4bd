"""JetStream ingest against the real NATS server on 127.0.0.1:4222: a real `sidewatch serve`
process, a stream of its own per test (deleted afterwards), and the store read back."""

from __future__ import annotations

import asyncio
import gzip
import json
import sqlite3
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import httpx
import nats
import pytest
from nats.js import JetStreamContext
from nats.js.api import ConsumerInfo
from sqlalchemy import create_engine

from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.daemon.jetstream import unit_key
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store
from tests.daemon.test_e2e import Server, _stop, _wait_for
from tests.daemon.test_e2e import _start as _serve
from tests.daemon.test_store_refusals import LEAKS, POISON
from tests.storefaults import impatient, refusing_thread, writes_blocked

NATS_URL = "nats://127.0.0.1:4222"
SECRET = "s3cret-tool-argument-7f1d"  # must never reach the logs


@dataclass(frozen=True)
class Stream:
    name: str
    subject: str


async def _on_error(e: Exception) -> None:
    """Tell connection errors by raising from connect, not by printing tracebacks."""


def _js(fn: Callable[[JetStreamContext], Awaitable[Any]]) -> Any:
    """Run `fn` with a JetStream context on the real server; an unreachable server raises."""

    async def run() -> Any:
        nc = await nats.connect(
            NATS_URL,
            connect_timeout=2,
            max_reconnect_attempts=1,
            reconnect_time_wait=0.5,
            error_cb=_on_error,
        )
        try:
            return await fn(nc.jetstream())
        finally:
            await nc.close()

    return asyncio.run(run())


@pytest.fixture
def stream() -> Iterator[Stream]:
    name = f"SWTEST_{uuid.uuid4().hex[:12]}"
    subject = f"swtest.{name.lower()}"
    _js(lambda js: js.add_stream(name=name, subjects=[f"{subject}.>"]))
    yield Stream(name, subject)
    _js(lambda js: js.delete_stream(name))


def _publish(stream: Stream, *bodies: bytes | tuple[bytes, dict[str, str]]) -> None:
    async def publish(js: JetStreamContext) -> None:
        for n, item in enumerate(bodies):
            body, headers = item if isinstance(item, tuple) else (item, None)
            await js.publish(f"{stream.subject}.agent{n % 3}", body, headers=headers)

    _js(publish)


def _consumer(stream: Stream) -> ConsumerInfo:
    info: ConsumerInfo = _js(lambda js: js.consumer_info(stream.name, "sidewatch"))
    return info


def _lines(n: int) -> list[dict[str, Any]]:
    """One wait, with no timestamps: the stream's own time stands in for them."""
    thread, run = f"nats-thread-{n}", f"nats-run-{n}"
    return [
        {"type": "RUN_STARTED", "threadId": thread, "runId": run},
        {
            "type": "RUN_FINISHED",
            "threadId": thread,
            "runId": run,
            "outcome": {
                "type": "interrupt",
                "interrupts": [{"id": f"int-{n}", "reason": "confirmation"}],
            },
        },
    ]


def _message(n: int) -> bytes | tuple[bytes, dict[str, str]]:
    """Every form a POST /v1/events body may take, in turn."""
    lines = _lines(n)
    ndjson = "".join(json.dumps(x) + "\n" for x in lines).encode()
    forms: list[bytes | tuple[bytes, dict[str, str]]] = [
        ndjson,
        gzip.compress(ndjson),
        (json.dumps(lines).encode(), {"Content-Type": "application/json"}),
        "".join(f"data: {json.dumps(x)}\n\n" for x in lines).encode(),
        (gzip.compress(ndjson), {"Content-Encoding": "gzip"}),
    ]
    return forms[n % len(forms)]


def _start(tmp: Path, stream: Stream, db_url: str, store: str = "", ack_wait: str = "2s") -> Server:
    """`sidewatch serve` on a free port, ingesting from `stream`."""
    return _serve(
        tmp,
        db_url,
        extra=f"nats: {{url: '{NATS_URL}', stream: {stream.name}, "
        f"subject: '{stream.subject}.>', batch: 8, ackWait: {ack_wait}, retryDelay: 300ms}}\n",
        store=store,
    )


def _units(db_url: str) -> list[tuple[str, int, int, int]]:
    """(key, received_at, accepted, rejected) of every unit that came from NATS."""
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            rows = conn.exec_driver_sql(
                "SELECT key, received_at, accepted, rejected FROM unit "
                "WHERE source LIKE 'nats:%%' ORDER BY id"
                if conn.dialect.paramstyle != "qmark"
                else "SELECT key, received_at, accepted, rejected FROM unit "
                "WHERE source LIKE 'nats:%' ORDER BY id"
            ).fetchall()
    finally:
        engine.dispose()
    return [(str(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in rows]


def _settled(stream: Stream) -> bool:
    """Nothing left to deliver and nothing delivered but unacknowledged."""
    info = _consumer(stream)
    return info.num_pending == 0 and info.num_ack_pending == 0


class Consumed(NamedTuple):
    """What a daemon left after consuming a stream until nothing was pending."""

    ingested: bool
    settled: bool
    units: list[tuple[str, int, int, int]]
    info: Any
    metrics: str
    log: str


def _consume_three(tmp: Path, stream: Stream, db_url: str) -> Consumed:
    """Serve until three units are stored and the stream is settled, then past `ackWait` (a
    terminated message is never redelivered), and stop."""
    server = _start(tmp, stream, db_url, ack_wait="1s")
    try:
        ingested = _wait_for(lambda: len(_units(server.db_url)) >= 3)
        settled = _wait_for(lambda: _settled(stream))
        time.sleep(2)
        units = _units(server.db_url)
        info = _consumer(stream)
        metrics = httpx.get(f"{server.url}/metrics").text
    finally:
        _stop(server)
    return Consumed(ingested, settled, units, info, metrics, server.log.read_text())


def test_messages_published_while_sidewatch_is_down_are_each_ingested_exactly_once(
    tmp_path: Path, stream: Stream, db_url: str
) -> None:
    published_from = int(time.time() * 1000)
    _publish(stream, *(_message(n) for n in range(30)))
    published_to = int(time.time() * 1000)
    created = _js(lambda js: js.stream_info(stream.name)).created

    server = _start(tmp_path, stream, db_url)
    try:
        ingested = _wait_for(lambda: len(_units(server.db_url)) >= 30)
        audited = _wait_for(
            lambda: len(httpx.get(f"{server.url}/v1/waits?limit=100").json()["waits"]) == 30
        )
        settled = _wait_for(lambda: _settled(stream))
        waits = httpx.get(f"{server.url}/v1/waits?limit=100").json()["waits"]
        metrics = httpx.get(f"{server.url}/metrics").text
    finally:
        _stop(server)
    server = _start(tmp_path, stream, db_url)  # a restart finds nothing left to ingest
    try:
        _publish(stream, _message(30))
        _wait_for(lambda: len(_units(server.db_url)) >= 31)
        time.sleep(3)  # past ackWait: a redelivery would have come by now
        units = _units(server.db_url)
        settled_again = _settled(stream)
    finally:
        _stop(server)

    assert (ingested, audited, settled, settled_again) == (True, True, True, True)
    assert [unit_key(stream.name, created, seq) for seq in range(1, 32)] == [u[0] for u in units]
    assert [(2, 0)] * 31 == [(u[2], u[3]) for u in units]
    assert {f"nats-thread-{n}/int-{n}" for n in range(30)} == {w["requestId"] for w in waits}
    # the backlog keeps the times it was published at, not the time it was read
    assert all(published_from <= u[1] <= published_to for u in units[:30])
    assert 'sidewatch_ingested_lines_total{kind="run"} 30.0' in metrics


def test_a_message_committed_before_a_crash_is_acknowledged_not_stored_twice(
    tmp_path: Path, stream: Stream, db_url: str
) -> None:
    """The crash between the commit and the ack, exactly: the consumer delivered message 1,
    its unit is committed under its key, and the ack never reached the server."""
    bodies = [_message(n) for n in range(3)]
    _publish(stream, *bodies)

    async def deliver_first(js: JetStreamContext) -> Any:
        sub = await js.pull_subscribe(
            f"{stream.subject}.>", durable="sidewatch", stream=stream.name
        )
        (msg,) = await sub.fetch(1, timeout=5)
        created = (await js.stream_info(stream.name)).created
        return msg.data, unit_key(stream.name, created, msg.metadata.sequence.stream)

    body, key = _js(deliver_first)  # delivered, never acknowledged
    engine = open_store(db_url)
    # received now: a unit older than store.retention would be pruned by serve's first tick
    received = int(time.time() * 1000)
    Ingest(Store(engine), ref_protector(engine, Config()), Config()).body(
        "nats:crashed", body, received, key=key
    )
    engine.dispose()

    server = _start(tmp_path, stream, db_url, ack_wait="1s")
    try:
        ingested = _wait_for(lambda: len(_units(server.db_url)) >= 3)
        settled = _wait_for(lambda: _settled(stream))  # message 1 redelivered, acknowledged
        time.sleep(2)
        units = _units(server.db_url)
        info = _consumer(stream)
        metrics = httpx.get(f"{server.url}/metrics").text
    finally:
        _stop(server)

    assert (ingested, settled) == (True, True)
    assert 3 == len(units)
    assert (key, received) == units[0][:2]  # the unit committed before the crash, not a second one
    # delivered four times: message 1 before the crash and again after it, then 2 and 3
    assert (0, 0, 4) == (info.num_pending, info.num_ack_pending, info.delivered.consumer_seq)
    assert 'sidewatch_ingested_lines_total{kind="run"} 3.0' in metrics


def test_a_message_redelivered_by_a_sigkill_is_never_stored_twice(
    tmp_path: Path, stream: Stream, db_url: str
) -> None:
    _publish(stream, *(_message(n) for n in range(200)))

    server = _start(tmp_path, stream, db_url, ack_wait="1s")
    started = _wait_for(lambda: len(_units(server.db_url)) >= 20, seconds=30)
    server.proc.kill()  # mid-stream: some units committed, their acks maybe not sent
    server.proc.wait()
    server = _start(tmp_path, stream, db_url, ack_wait="1s")
    try:
        ingested = _wait_for(lambda: len(_units(server.db_url)) >= 200, seconds=60)
        settled = _wait_for(lambda: _settled(stream), seconds=30)
        time.sleep(2)
        units = _units(server.db_url)
        metrics = httpx.get(f"{server.url}/metrics").text
    finally:
        _stop(server)

    assert (started, ingested, settled) == (True, True, True)
    assert 200 == len(units) == len({u[0] for u in units})
    assert 'sidewatch_ingested_lines_total{kind="run"} 200.0' in metrics


def test_an_unreadable_message_is_terminated_and_does_not_block_the_others(
    tmp_path: Path, stream: Stream, db_url: str
) -> None:
    half_bad = b"".join(json.dumps(x).encode() + b"\n" for x in _lines(2)) + b"{nope\n"
    _publish(
        stream,
        _message(0),
        (SECRET.encode(), {"Content-Encoding": "gzip"}),  # not gzip at all
        (SECRET.encode(), {"Content-Type": "application/x-www-form-urlencoded"}),
        b"   \n",  # no line to ingest
        gzip.compress(SECRET.encode() * 10)[:40],  # a truncated gzip stream
        half_bad,
        _message(1),
    )

    ingested, settled, units, info, metrics, log = _consume_three(tmp_path, stream, db_url)

    assert (ingested, settled) == (True, True)
    assert [(2, 0), (2, 1), (2, 0)] == [(u[2], u[3]) for u in units]
    for outcome, n in (("stored", 3), ("unreadable", 4), ("duplicate", 0), ("retry", 0)):
        assert f'sidewatch_jetstream_messages_total{{outcome="{outcome}"}} {n}.0' in metrics
    assert "sidewatch_jetstream_consuming 1.0" in metrics
    # seven deliveries for seven messages: none came back
    assert (0, 0, 7) == (info.num_pending, info.num_ack_pending, info.delivered.consumer_seq)
    assert 4 == log.count("cannot be read")
    assert SECRET not in log


def test_a_store_outage_naks_and_the_message_is_stored_once_the_store_is_back(
    tmp_path: Path, stream: Stream
) -> None:
    # SQLite only: another process holding the write lock is SQLite's outage (PostgreSQL's is
    # tested in test_pg_outage.py)
    db = tmp_path / "sidewatch.db"
    server = _start(tmp_path, stream, f"sqlite:///{db}", store=", busyTimeout: 200ms")
    lock = sqlite3.connect(db, isolation_level=None)
    try:
        lock.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        _publish(stream, _message(0))
        # the message's own nak, not an audit tick that met the same lock
        refused = _wait_for(lambda: "to be delivered again" in server.log.read_text())
        during = _units(server.db_url)
        lock.execute("ROLLBACK")
        stored = _wait_for(lambda: len(_units(server.db_url)) >= 1)
        settled = _wait_for(lambda: _settled(stream))
        time.sleep(3)
        after = _units(server.db_url)
        metrics = httpx.get(f"{server.url}/metrics").text
    finally:
        lock.close()
        _stop(server)

    assert (refused, stored, settled) == (True, True, True)
    assert ([], 1) == (during, len(after))
    assert 'sidewatch_jetstream_messages_total{outcome="stored"} 1.0' in metrics
    assert 'sidewatch_jetstream_messages_total{outcome="retry"} 0.0' not in metrics


def test_sidewatch_waits_for_a_missing_stream_and_keeps_serving(
    tmp_path: Path, db_url: str
) -> None:
    later = Stream(f"SWTEST_{uuid.uuid4().hex[:12]}", f"swtest.later{uuid.uuid4().hex[:8]}")
    server = _start(tmp_path, later, db_url)
    try:
        waiting = _wait_for(lambda: f"stream {later.name} does not exist" in server.log.read_text())
        healthy = httpx.get(f"{server.url}/healthz").status_code
        _js(lambda js: js.add_stream(name=later.name, subjects=[f"{later.subject}.>"]))
        try:
            _publish(later, _message(0))
            ingested = _wait_for(lambda: len(_units(server.db_url)) >= 1, seconds=30)
        finally:
            _js(lambda js: js.delete_stream(later.name))
    finally:
        code = _stop(server)

    assert (waiting, 200, ingested) == (True, healthy, True)
    assert code in (0, -15)  # SIGTERM still stops it cleanly


def test_a_message_the_store_refuses_is_terminated_and_the_ones_behind_it_land(
    tmp_path: Path, stream: Stream, db_url: str
) -> None:
    poison = "".join(
        json.dumps({**line, "threadId": POISON}) + "\n" if "threadId" in line else ""
        for line in _lines(9)
    ).encode()
    _publish(stream, _message(0), poison, _message(1), _message(2))

    with refusing_thread(db_url, POISON):
        ingested, settled, units, info, metrics, log = _consume_three(tmp_path, stream, db_url)

    assert (ingested, settled) == (True, True)
    assert 3 == len(units)
    for outcome, n in (("stored", 3), ("refused", 1), ("unreadable", 0), ("retry", 0)):
        assert f'sidewatch_jetstream_messages_total{{outcome="{outcome}"}} {n}.0' in metrics
    # four deliveries for four messages: the refused one never came back
    assert (0, 0, 4) == (info.num_pending, info.num_ack_pending, info.delivered.consumer_seq)
    assert 1 == log.count("terminated, the store refused its data: IntegrityError")
    for leak in LEAKS:
        assert leak not in log


def _transactions(pg_url: str) -> list[str]:
    """The transaction that stored each NATS unit, in unit order (PostgreSQL's `xmin`)."""
    engine = create_engine(pg_url)
    try:
        with engine.connect() as conn:
            rows = conn.exec_driver_sql(
                "SELECT xmin::text FROM unit WHERE source LIKE 'nats:%%' ORDER BY id"
            ).fetchall()
    finally:
        engine.dispose()
    return [str(r[0]) for r in rows]


def test_a_fetched_batch_is_committed_in_one_transaction_each_message_acked_by_its_outcome(
    tmp_path: Path, stream: Stream, pg_url: str
) -> None:
    # 24 messages, fetched 8 at a time: among them one stored before (a crash before its
    # ack), one that cannot be read and one with a rejected line
    half_bad = b"".join(json.dumps(x).encode() + b"\n" for x in _lines(5)) + b"{nope\n"
    bodies = [_message(n) for n in range(24)]
    bodies[3] = (SECRET.encode(), {"Content-Encoding": "gzip"})
    bodies[5] = half_bad
    _publish(stream, *bodies)
    created = _js(lambda js: js.stream_info(stream.name)).created
    engine = open_store(pg_url)
    stored_before = unit_key(stream.name, created, 10)
    body = bodies[9]
    Ingest(Store(engine), ref_protector(engine, Config()), Config()).body(
        "nats:crashed",
        body if isinstance(body, bytes) else gzip.decompress(body[0]),
        int(time.time() * 1000),  # now: serve prunes units older than store.retention
        key=stored_before,
    )
    engine.dispose()

    ingested, settled, units, info, metrics, log = _consume_three(tmp_path, stream, pg_url)
    transactions = _transactions(pg_url)

    assert (ingested, settled) == (True, True)
    # every readable message once, the one stored before not again
    assert [unit_key(stream.name, created, s) for s in range(1, 25) if s != 4] == sorted(
        (u[0] for u in units), key=lambda k: int(k.rsplit(":", 1)[1])
    )
    assert (2, 1) == next((u[2], u[3]) for u in units if u[0].endswith(":6"))
    # three fetches, three transactions (the unit stored before the crash has its own)
    assert 4 == len(set(transactions))
    for outcome, n in (("stored", 22), ("duplicate", 1), ("unreadable", 1), ("retry", 0)):
        assert f'sidewatch_jetstream_messages_total{{outcome="{outcome}"}} {n}.0' in metrics
    # 24 deliveries for 24 messages: every one acknowledged or terminated at once
    assert (0, 0, 24) == (info.num_pending, info.num_ack_pending, info.delivered.consumer_seq)
    assert SECRET not in log


def test_a_store_outage_mid_batch_naks_the_whole_batch_and_nothing_of_it_is_stored(
    tmp_path: Path, stream: Stream, pg_url: str
) -> None:
    # The units' rows go in, then their facts meet a lock held by another client: the
    # batch's transaction fails part-way through.
    open_store(pg_url).dispose()
    with writes_blocked(pg_url, "run_fact"):
        _publish(stream, *(_message(n) for n in range(8)))  # one fetch takes all eight
        server = _start(tmp_path, stream, impatient(pg_url))
        refused = _wait_for(lambda: "(8) not acknowledged" in server.log.read_text())
        during = _units(pg_url)
    try:
        stored = _wait_for(lambda: len(_units(pg_url)) >= 8)
        settled = _wait_for(lambda: _settled(stream))
        time.sleep(3)
        after = _units(pg_url)
        metrics = httpx.get(f"{server.url}/metrics").text
    finally:
        _stop(server)

    assert (refused, stored, settled) == (True, True, True)
    assert ([], 8, 8) == (during, len({u[0] for u in after}), len(after))
    assert 'sidewatch_jetstream_messages_total{outcome="stored"} 8.0' in metrics
