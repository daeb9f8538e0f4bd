"""NATS JetStream ingest: a durable pull consumer whose every message is one ingest unit;
each fetched batch is committed in one transaction and its messages acknowledged only after
it, so a tee can publish while sidewatch is down. The message's stream sequence is the unit's
key: a message delivered again after its commit (a crash before the ack reached the server) is
acknowledged again, never stored twice."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from urllib.parse import urlsplit

import nats
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.concurrency import run_in_threadpool

from sidewatch.app.ingest import Ingest, ReadUnit, media_and_encoding
from sidewatch.config import NatsSource
from sidewatch.errors import InputError, StoreError, StoreRefused, TooLarge

log = logging.getLogger("sidewatch.nats")

FETCH_WAIT_S = 2.0  # one pull request's life: also how long a stop may wait for it
CHECK_WAIT_S = 2.0  # after an empty fetch, how long the consumer's info may take to come
STOP_WAIT_S = 15.0  # a stop waits this long for the running batch, then cancels it
MAX_BACKOFF_S = 30.0


class Outcome(StrEnum):
    STORED = "stored"  # committed: ack
    DUPLICATE = "duplicate"  # committed by an earlier delivery: ack again
    UNREADABLE = "unreadable"  # can never be read: terminate (no redelivery), logged
    REFUSED = "refused"  # the store refused its data, and would again: terminate, logged
    RETRY = "retry"  # the store is unavailable and nothing was stored: nak, redelivered later


def handle(
    ingest: Ingest,
    source: str,
    body: bytes,
    headers: Mapping[str, str] | None,
    received_at: int,
    key: str,
) -> Outcome:
    """One message through the ingest path HTTP takes too (blocking; run it in a worker
    thread). What HTTP answers with 400, 413 or 415 is UNREADABLE (REFUSED: the store
    refused its data) here; its 503 is RETRY."""
    try:
        media, encoding = _decoded(ingest, body, headers)
        summary = ingest.body(
            source, body, received_at, media_type=media, encoding=encoding, key=key
        )
    except StoreRefused as e:
        # Redelivered, it would be refused again and hold back every message behind it.
        log.warning(
            "JetStream message %s terminated, the store refused its data: %s", key, e.reason
        )
        return Outcome.REFUSED
    except (InputError, TooLarge) as e:
        # The reason names the problem (a line number, a size), never the content.
        log.warning("JetStream message %s terminated, it cannot be read: %s", key, e)
        return Outcome.UNREADABLE
    except StoreError as e:
        log.warning(
            "JetStream message %s not acknowledged, to be delivered again: %s", key, e.reason
        )
        return Outcome.RETRY
    return Outcome.DUPLICATE if summary.duplicate else Outcome.STORED


@dataclass(frozen=True, slots=True)
class Delivered:
    """One fetched message, as `handle` takes it."""

    body: bytes
    headers: Mapping[str, str] | None
    received_at: int
    key: str


def handle_batch(ingest: Ingest, source: str, batch: Sequence[Delivered]) -> list[Outcome]:
    """A fetched batch through the ingest path in ONE transaction (blocking), each message's
    outcome as `handle` would give it: what cannot be read is UNREADABLE before the store is
    touched; the rest are committed together (STORED, or DUPLICATE for a key stored before),
    or, on an outage, all RETRY with nothing stored. When the store refuses one message's
    data the whole transaction is rolled back and each message goes through `handle` on its
    own, so the refused one is REFUSED and the others land."""
    outcomes: list[Outcome | None] = [None] * len(batch)
    read: list[tuple[int, ReadUnit]] = []
    for n, msg in enumerate(batch):
        try:
            media, encoding = _decoded(ingest, msg.body, msg.headers)
            unit = ingest.read(
                source, msg.body, msg.received_at, media_type=media, encoding=encoding, key=msg.key
            )
            read.append((n, unit))
        except (InputError, TooLarge) as e:
            # The reason names the problem (a line number, a size), never the content.
            log.warning("JetStream message %s terminated, it cannot be read: %s", msg.key, e)
            outcomes[n] = Outcome.UNREADABLE
    if read:
        try:
            summaries = ingest.units([unit for _, unit in read])
        except StoreRefused:
            for n, _ in read:
                msg = batch[n]
                outcomes[n] = handle(
                    ingest, source, msg.body, msg.headers, msg.received_at, msg.key
                )
        except StoreError as e:
            log.warning(
                "JetStream messages %s to %s (%d) not acknowledged, to be delivered again: %s",
                batch[read[0][0]].key,
                batch[read[-1][0]].key,
                len(read),
                e.reason,
            )
            for n, _ in read:
                outcomes[n] = Outcome.RETRY
        else:
            for (n, _), summary in zip(read, summaries, strict=True):
                outcomes[n] = Outcome.DUPLICATE if summary.duplicate else Outcome.STORED
    return [o for o in outcomes if o is not None]


def _decoded(
    ingest: Ingest, body: bytes, headers: Mapping[str, str] | None
) -> tuple[str | None, str]:
    """A message's media type and encoding from its headers, within the body limit a request
    has; raises InputError or TooLarge."""
    head = {k.lower(): v for k, v in (headers or {}).items()}
    decoded = media_and_encoding(head.get("content-type"), head.get("content-encoding"))
    if isinstance(decoded, str):
        raise InputError(decoded)
    limit = ingest.config.max_body_bytes
    if len(body) > limit:
        raise TooLarge(f"message of {len(body)} bytes is over the limit of {limit}")
    return decoded


def unit_key(stream: str, created: datetime | None, sequence: int) -> str:
    """A message's identity as a unit key. The stream's creation time tells a re-created
    stream (sequences from 1 again) from the one whose messages are already stored."""
    epoch = created.strftime("%Y%m%dT%H%M%S%f") if created else "0"
    return f"nats:{stream}:{epoch}:{sequence}"


def server_of(url: str) -> str:
    """host:port of a NATS URL, for messages (the URL itself may hold a password)."""
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port or 4222}"


class JetStreamIngest:
    """The consumer's background task: connects (and reconnects) to NATS, makes sure the
    durable consumer exists, and feeds each fetched message to `handle`."""

    def __init__(self, ingest: Ingest, source: NatsSource) -> None:
        self.ingest = ingest
        self.source = source
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.consuming = False  # bound to the consumer: a stop lets the batch finish
        # The server answered this session's last fetch or consumer check: False while NATS
        # is cut off, even before the client notices its connection is gone.
        self.answering = False
        self.pending: int | None = None  # the consumer's messages not yet delivered (lag)
        # Called (on the event loop) after a batch stored something: the daemon audits soon.
        self.on_stored: Callable[[], None] = lambda: None
        self._backoff = 1.0
        self._reported = False  # a connection error was logged since the last (re)connect
        # What became of the messages this replica handled (every outcome from the start, so
        # the collector never sees the dict change size)
        self.outcomes: dict[Outcome, int] = dict.fromkeys(Outcome, 0)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="sidewatch-jetstream")

    async def stop(self) -> None:
        """Let the running fetch expire and the running batch finish (its unprocessed messages
        are nak'ed for immediate redelivery), then close the connection, flushing the acks."""
        self._stopping.set()
        if self._task is None:
            return
        if not self.consuming:  # connecting or backing off: nothing in hand to finish
            self._task.cancel()
        done, _ = await asyncio.wait({self._task}, timeout=STOP_WAIT_S)
        if not done:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _pause(self, seconds: float) -> None:
        """Sleep, but wake up at once when asked to stop."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    @property
    def healthy(self) -> bool:
        """Bound to the consumer, and the server answers."""
        return self.consuming and self.answering

    async def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                await self._session()
                self._backoff = 1.0
            except Exception as e:  # never fatal: NATS down, stream missing, consumer deleted
                log.warning(
                    "JetStream ingest from %s paused: %s; retrying in %.0fs",
                    server_of(self.source.url),
                    e if isinstance(e, LookupError) else f"{type(e).__name__}: {e}",
                    self._backoff,
                )
                await self._pause(self._backoff)
                self._backoff = min(self._backoff * 2, MAX_BACKOFF_S)

    async def _session(self) -> None:
        src = self.source
        server = server_of(src.url)

        async def on_error(e: Exception) -> None:
            if not self._reported:  # once an outage, not at every reconnect attempt
                self._reported = True
                log.warning("NATS %s: %s: %s; retrying", server, type(e).__name__, e)

        async def on_disconnected() -> None:
            if not closing:  # not our own close at the end of a session
                log.warning("NATS %s disconnected; reconnecting", server)

        async def on_reconnected() -> None:
            self._reported = False
            log.info("NATS %s reconnected", server)

        closing = False
        # The client retries the first connection and every reconnection by itself, forever.
        nc = await nats.connect(
            src.url,
            name="sidewatch",
            connect_timeout=5,
            reconnect_time_wait=2,
            max_reconnect_attempts=-1,
            error_cb=on_error,
            disconnected_cb=on_disconnected,
            reconnected_cb=on_reconnected,
        )
        self._reported = False
        try:
            js = nc.jetstream()
            try:
                created = (await js.stream_info(src.stream)).created
            except nats.js.errors.NotFoundError:
                raise LookupError(
                    f"stream {src.stream} does not exist: create it (sidewatch creates its "
                    "durable consumer, never the stream)"
                ) from None
            await js.add_consumer(
                src.stream,
                ConsumerConfig(
                    durable_name=src.durable,
                    ack_policy=AckPolicy.EXPLICIT,
                    deliver_policy=DeliverPolicy.ALL,
                    ack_wait=src.ack_wait_ms / 1000,
                    max_deliver=-1,
                    filter_subject=src.subject,
                ),
            )
            sub = await js.pull_subscribe_bind(durable=src.durable, stream=src.stream)
            log.info(
                "ingesting from JetStream: stream %s on %s, durable consumer %s",
                src.stream,
                server,
                src.durable,
            )
            self.consuming = self.answering = True
            while not self._stopping.is_set():
                try:
                    msgs = await sub.fetch(src.batch, timeout=FETCH_WAIT_S)
                except TimeoutError:  # nats' own, or asyncio's (nats-py raises either)
                    # Nothing new, or a server that no longer answers: its consumer's info
                    # tells them apart (and gives the lag).
                    try:
                        info = await asyncio.wait_for(sub.consumer_info(), CHECK_WAIT_S)
                    except Exception as e:  # the client reconnects by itself
                        if self.answering:
                            log.warning(
                                "JetStream on %s does not answer (%s); not consuming",
                                server,
                                type(e).__name__,
                            )
                        self.answering = False
                        continue
                    self.pending = info.num_pending
                    self._healthy()
                    continue
                self._healthy()
                self.pending = msgs[-1].metadata.num_pending if msgs else self.pending
                await self._batch(msgs, created)
        finally:
            self.consuming = self.answering = False
            closing = True
            with contextlib.suppress(Exception):
                await nc.close()  # flushes the acks not yet written

    def _healthy(self) -> None:
        if not self.answering:
            log.info("JetStream answers again: consuming")
        self.answering = True
        self._backoff = 1.0  # a pause after this healthy session starts short again

    async def _batch(self, msgs: list[Msg], created: datetime | None) -> None:
        """The fetched batch committed in one transaction, then each message acknowledged
        (stored or stored before), terminated (never readable, or refused by the store), or
        nak'ed (store unavailable: the whole batch, nothing of it was stored)."""
        src = self.source
        if self._stopping.is_set():
            for msg in msgs:
                await msg.nak()  # redelivered at once, to the next consumer
            return
        delivered = [
            Delivered(
                msg.data,
                msg.headers,
                # The time the stream stored the message stands in for missing event
                # timestamps: a backlog published while sidewatch was down keeps its own times.
                int(msg.metadata.timestamp.timestamp() * 1000),
                unit_key(src.stream, created, msg.metadata.sequence.stream),
            )
            for msg in msgs
        ]
        work = asyncio.ensure_future(
            run_in_threadpool(handle_batch, self.ingest, f"nats:{src.stream}", delivered)
        )
        # The batch's one transaction may outlast ackWait (a slow disk, a loaded host): tell
        # JetStream the messages are in progress, or it delivers them all again meanwhile.
        while not (await asyncio.wait({work}, timeout=src.ack_wait_ms / 3000))[0]:
            for msg in msgs:
                await msg.in_progress()
        outcomes = work.result()
        if Outcome.STORED in outcomes:
            self.on_stored()
        retry = False
        for msg, outcome in zip(msgs, outcomes, strict=True):
            self.outcomes[outcome] += 1
            if outcome is Outcome.RETRY:
                retry = True
                await msg.nak(delay=src.retry_delay_ms / 1000)
            elif outcome in (Outcome.UNREADABLE, Outcome.REFUSED):
                await msg.term()
            else:
                await msg.ack()
        if retry:
            await self._pause(src.retry_delay_ms / 1000)


class JetStreamCollector(Collector):
    """This replica's JetStream consumer on /metrics (per replica: a sum over replicas counts
    each delivery once)."""

    def __init__(self, consumer: JetStreamIngest) -> None:
        self.consumer = consumer

    def collect(self) -> Iterator[Metric]:
        messages = CounterMetricFamily(
            "sidewatch_jetstream_messages",
            "JetStream messages handled by this replica, by outcome: stored (acked), duplicate "
            "(stored before, acked again), unreadable (terminated), refused (the store refused "
            "its data: terminated), retry (store unavailable, nak'ed for redelivery).",
            labels=["outcome"],
        )
        for outcome, n in self.consumer.outcomes.items():
            messages.add_metric([outcome.value], n)
        yield messages
        consuming = GaugeMetricFamily(
            "sidewatch_jetstream_consuming",
            "1 while this replica is bound to its durable consumer and the server answers, 0 "
            "while NATS or the stream is unavailable or does not answer.",
        )
        consuming.add_metric([], 1 if self.consumer.healthy else 0)
        yield consuming
        if self.consumer.pending is not None:
            pending = GaugeMetricFamily(
                "sidewatch_jetstream_pending",
                "Messages of the stream the durable consumer has not delivered yet (its lag), "
                "as last reported to this replica.",
            )
            pending.add_metric([], self.consumer.pending)
            yield pending
