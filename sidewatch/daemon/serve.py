"""`sidewatch serve`: the HTTP API on uvicorn and the scheduled auditor on APScheduler.

SIGTERM (or Ctrl-C) stops accepting connections, drains in-flight requests, lets a running
audit tick finish, and closes the store; SIGHUP reloads the config (see daemon.reload).
Everything the daemon knows is in the store, so a restart continues from there with nothing
lost or counted twice."""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import signal
import sys
import threading
import time
import traceback
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeVar

import orjson
import uvicorn
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger
from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy.exc import StatementError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool

from sidewatch import __version__
from sidewatch.app.audit import Auditor, TickReport, push_problems
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.app.read import Read
from sidewatch.app.report import report, write_reports
from sidewatch.config import Config
from sidewatch.core.policy import Policy
from sidewatch.core.text import cap, clean, safe
from sidewatch.daemon.http import AppState, create_app
from sidewatch.daemon.listen import bind, check_listen
from sidewatch.daemon.protocol import head_deadline
from sidewatch.daemon.reload import key_of, reloaded
from sidewatch.daemon.selfwatch import SelfCollector
from sidewatch.daemon.writes import cause
from sidewatch.errors import LeaseLost, SidewatchError, StoreError
from sidewatch.exporters.alertmanager import AlertmanagerPush
from sidewatch.exporters.otel import from_environment
from sidewatch.exporters.prometheus import AlertPushCollector, SnapshotCollector
from sidewatch.store.db import Limits, failure, open_store, require_head
from sidewatch.store.lease import AuditLease
from sidewatch.store.repo import Store

if TYPE_CHECKING:
    from sidewatch.daemon.jetstream import JetStreamIngest

log = logging.getLogger("sidewatch")
T = TypeVar("T")
LOG_MESSAGE_LIMIT = 2000  # characters of a log record's message
LOG_TRACEBACK_LIMIT = 16_000


class JsonLogs(logging.Formatter):
    """One JSON object per line: time, level, logger, message (and the exception, if any).
    A message may hold a producer's ids: it is cleaned and capped (`core.text.safe`), and the
    traceback line by line, so that no input can forge a record or a line of its own."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": safe(record.getMessage(), LOG_MESSAGE_LIMIT),
        }
        # Every `extra=` field (our code's counts and ids, never content), cleaned like msg.
        for key, value in vars(record).items():
            if key not in _RECORD_FIELDS and key not in entry:
                entry[key] = safe(value, LOG_MESSAGE_LIMIT) if isinstance(value, str) else value
        if record.exc_info:
            lines = self.formatException(record.exc_info).split("\n")
            entry["exc"] = cap("\n".join(map(clean, lines)), LOG_TRACEBACK_LIMIT)
        return orjson.dumps(entry, default=_logged).decode()

    def formatException(self, ei: Any) -> str:
        """The traceback; but where a database error is in it, that error is told as its class
        and code only (its text holds the statement, and a server's DETAIL line may hold a
        unit's values) and frames without their source lines (which may quote a statement)."""
        chain: list[BaseException] = []
        exc: BaseException | None = ei[1]
        while exc is not None and exc not in chain:
            chain.append(exc)
            exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
        if not any(_is_db_error(x) for x in chain):
            return super().formatException(ei)
        return "\n\nwhich led to:\n\n".join(
            "Traceback (most recent call last):\n"
            + "".join(
                f'  File "{f.filename}", line {f.lineno}, in {f.name}\n'
                for f in traceback.extract_tb(x.__traceback__)
            )
            + (failure(x) if _is_db_error(x) else f"{type(x).__name__}: {x}")
            for x in reversed(chain)
        )


# What every LogRecord has: anything else on a record came from `extra=`.
_RECORD_FIELDS = frozenset(
    {*vars(logging.LogRecord("", 0, "", 0, "", (), None)), "message", "asctime", "taskName"}
    | {"color_message"}  # uvicorn's msg again, with terminal colours
)


def _logged(value: Any) -> str:
    """An `extra=` value JSON cannot hold, as its cleaned text."""
    return safe(str(value), LOG_MESSAGE_LIMIT)


def _is_db_error(e: BaseException) -> bool:
    """SQLAlchemy's wrapper of a driver error, or a driver's own (psycopg, sqlite3)."""
    return isinstance(e, StatementError) or hasattr(e, "sqlstate") or hasattr(e, "sqlite_errorcode")


LOG_REPEAT_SECONDS = 60.0  # how often a message a client can trigger may be logged


def setup_logging(level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLogs())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    # Loggers a client can make speak once per connection: asyncio's "socket.accept() out of
    # system resource" on a connection flood, uvicorn's "Invalid HTTP request received.".
    for name in ("asyncio", "uvicorn.error", "sidewatch.http"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, OncePer) for f in logger.filters):
            logger.addFilter(OncePer(LOG_REPEAT_SECONDS))


class OncePer(logging.Filter):
    """Lets each message through at most once per `seconds`; the next one that passes says how
    many were held back meanwhile."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        # The template's first line: asyncio's messages go on with the socket's repr.
        key = str(record.msg).split("\n", 1)[0][:200]
        now = time.monotonic()
        last = self._last.get(key)
        if last is not None and now - last < self.seconds:
            self._held[key] = self._held.get(key, 0) + 1
            return False
        if len(self._last) > 1000:  # bounded, whatever the messages
            self._last.clear()
            self._held.clear()
        self._last[key] = now
        held = self._held.pop(key, 0)
        if held:
            record.msg = f"{record.msg} ({held} more like this held back)"
        return True


class _BuildInfo(Collector):
    def collect(self) -> Iterator[Metric]:
        info = GaugeMetricFamily(
            "sidewatch_build_info", "sidewatch's version (always 1).", labels=["version"]
        )
        info.add_metric([__version__], 1)
        yield info


class Daemon:
    """The pieces of a running daemon, wired once; `app` is the ASGI application."""

    def __init__(
        self,
        config: Config,
        migrate: bool = True,
        reread: Callable[[], Config] | None = None,
    ) -> None:
        self.config = config
        self._reread = reread  # the config as the command line reads it again (SIGHUP)
        self._reloads: set[asyncio.Task[None]] = set()
        # A tick and a change of policies never overlap: the tick's verdicts are one policy's.
        self._audit_lock = threading.Lock()
        self.engine = open_store(
            config.db_url,
            migrate=migrate,
            busy_timeout_ms=config.store_busy_timeout_ms,
            limits=Limits.of(config),
            heartbeat_gap_ms=config.heartbeat_gap_ms,
        )
        if not migrate:
            try:
                require_head(self.engine)
            except StoreError:
                self.engine.dispose()
                raise
        self.store = Store(self.engine, config.heartbeat_gap_ms)
        traces = from_environment(os.environ)
        self.tracer_provider = traces[1] if traces else None
        # Held 1.25 intervals and renewed every half interval (2.5 renewals per lease); a
        # standby also claims every half interval, so it takes over within 1.75 intervals of
        # the holder's last renewal.
        self.lease = AuditLease(self.engine, ttl_ms=config.audit_interval_ms * 5 // 4)
        self._claim_failed: str | None = None  # the store's reason the last claim failed
        # The lease term whose store-wide state the snapshot holds: loaded from the store when
        # the term began, or made by one of its ticks. Another term's is never served.
        self._snapshot_epoch: int | None = None
        try:  # before the counters load: a replica that takes the lease now needs no reload
            if self.lease.claim():
                log.info("holds the audit lease (epoch %s): this replica audits", self.lease.epoch)
        except StoreError as e:
            self._claim_failed = e.reason
            log.warning("audit lease not claimed yet: %s", e)
        self.auditor = Auditor(
            self.store,
            config.policies,
            on_closed=traces[0].on_closed if traces else None,
            lease=self.lease,
            retention_ms=config.store_retention_ms,
        )
        if self.lease.held:  # the counters were just loaded from the store, in this term
            self._snapshot_epoch = self.lease.epoch
        self.counters = self.auditor.ingest
        self.ingest = Ingest(self.store, ref_protector(self.engine, config), config, self.counters)
        registry = CollectorRegistry()
        registry.register(
            SnapshotCollector(
                self._current_snapshot,
                self.counters,
                lambda: self.lease.verified,
                skipped=lambda: self.auditor.skipped,
            )
        )
        registry.register(AlertPushCollector(lambda: self.alerts))
        registry.register(_BuildInfo())
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        self.state = AppState(
            config,
            self.store,
            self.auditor,
            self.ingest,
            Read(self.store, self.auditor.policy_for),
            registry,
            lease_held=lambda: self.lease.verified,
        )
        self.jetstream = _jetstream(config, self.ingest)
        if self.jetstream is not None:
            from sidewatch.daemon.jetstream import JetStreamCollector  # noqa: PLC0415

            registry.register(JetStreamCollector(self.jetstream))
        self.state.problems = self._problems
        if self._claim_failed is not None:
            self.state.writes.refused(time.monotonic(), self._claim_failed)
        self.app: Starlette = create_app(self.state, lifespan=self._lifespan)
        paths = sorted({str(getattr(r, "path", "")) for r in self.app.routes})
        registry.register(SelfCollector(self.state.selfwatch, paths, config.audit_interval_ms))
        self._running: set[asyncio.Future[Any]] = set()  # store work in worker threads
        # How long a tick classifies before it leaves the rest for the next one.
        self.tick_budget_s = config.audit_interval_ms / 1000 * TICK_BUDGET
        self._scheduler: AsyncIOScheduler | None = None
        self._stopping = False
        self.alerts = (
            AlertmanagerPush(
                config.alertmanager_url,
                config.alertmanager_resend_ms,
                config.alertmanager_max_per_push,
                config.audit_interval_ms,
                external_url=config.external_url,
                dashboard_url=config.alertmanager_dashboard_url,
            )
            if config.alertmanager_url
            else None
        )

    def _problems(self) -> list[str]:
        """What keeps this replica from being ready besides the store's answer: a lease it
        could not claim because of the store (no healthy standby either: it could not take
        over), a JetStream consumer cut off."""
        out = []
        if self._claim_failed is not None:
            out.append(f"audit lease neither renewed nor taken: {cause(self._claim_failed)}")
        if self.jetstream is not None and not self.jetstream.healthy:
            out.append("JetStream consumer not consuming")
        return out

    def _current_snapshot(self) -> Any:
        """The store-wide snapshot, only for the current, verified lease term and once that
        term has its own (the counters loaded from the store as it began, or its first tick):
        never a stalled holder's, never the last term's."""
        lease = self.lease
        if (
            lease.verified
            and self._snapshot_epoch is not None
            and self._snapshot_epoch == lease.epoch
        ):
            return self.auditor.snapshot
        return None

    async def claim(self) -> None:
        """Renew or take the audit lease (every half interval). On taking it over, continue
        the counters from the store and audit at once."""
        if self._stopping:
            return  # the lease is being released
        epoch = self.lease.epoch
        try:
            held = await run_in_threadpool(self.lease.claim)
        except StoreError as e:
            self._claim_failed = e.reason
            self.state.writes.refused(time.monotonic(), e.reason)
            log.warning("audit lease not renewed: %s", e)
            return
        self._claim_failed = None
        if held:  # renewed or taken: a write the store committed (a standby's claim reads)
            self.state.writes.committed(time.monotonic())
        if held and self.lease.epoch != epoch:
            log.info("holds the audit lease (epoch %s): this replica audits", self.lease.epoch)
            try:
                await run_in_threadpool(self.auditor.reload)
                self._snapshot_epoch = self.lease.epoch
            except StoreError as e:  # the next claim renews, the next tick retries
                log.warning("could not load the counters: %s", e)
            if self._scheduler is not None:
                self._scheduler.modify_job("audit", next_run_time=datetime.now(UTC))
        elif epoch is not None and not held:
            log.warning("lost the audit lease: another replica audits now")

    async def tick(self) -> None:
        """One audit tick in a worker thread, on the replica holding the lease; a store outage
        skips it (and /readyz says so)."""
        if self._stopping:
            return  # launched by the scheduler as the daemon stopped
        if not self.lease.held:
            if self._claim_failed is not None:  # not a standby: the store kept the lease unchecked
                log.warning("audit tick skipped: the audit lease could not be checked")
                self.auditor.skipped_tick()
            return  # a standby
        epoch = self.lease.epoch
        now = int(time.time() * 1000)
        try:
            report = await self._in_worker(self._audit, now)
        except LeaseLost as e:
            log.warning("audit tick dropped: %s", e)
            return
        except StoreError as e:
            log.warning("audit tick skipped: %s", e)
            self.state.writes.refused(time.monotonic(), e.reason)
            self.auditor.skipped_tick()
            return
        except Exception:
            log.exception("audit tick failed")
            return
        self._snapshot_epoch = epoch
        if report.threads:  # its batches committed
            self.state.writes.committed(time.monotonic())
        if report.threads or report.errors:
            log.info(
                "audit tick",
                extra={
                    "threads": report.threads,
                    "waits": report.waits,
                    "transitions": report.transitions,
                    "errors": report.errors,
                    "backlog": report.backlog,
                    "seconds": round(report.seconds, 4),
                },
            )

    async def nightly_report(self) -> None:
        """The report of the window ending now, in every configured format; old ones pruned.
        Written by the replica holding the audit lease, so once."""
        if self._stopping or not self.lease.held:
            return
        cfg = self.config
        end = int(time.time() * 1000)
        try:
            paths = await self._in_worker(
                write_reports,
                Path(cfg.report_directory),
                lambda: report(self.store, cfg.policies, end, cfg.report_window_ms),
                end,
                cfg.report_formats,
                cfg.report_retention_ms,
                end / 1000,  # now: reports past retention are pruned as of the window's end
                cfg.external_url,
            )
        except Exception:
            log.exception("nightly report failed")
            self.state.selfwatch.report_ran(ok=False)
            return
        self.state.selfwatch.report_ran(ok=True)
        log.info("report written: %s", ", ".join(str(p) for p in paths))

    async def _in_worker(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn` in a worker thread, shielded: the scheduler's shutdown cancels its job, but the
        thread would run on regardless, and the lifespan waits for it before closing the
        store."""
        job = asyncio.ensure_future(run_in_threadpool(fn, *args))
        self._running.add(job)
        job.add_done_callback(self._running.discard)
        return await asyncio.shield(job)

    def _audit(self, now: int) -> TickReport:
        """A tick, then (when configured) the Alertmanager push of its problem waits: sent by
        the auditor that ran the tick, so never twice."""
        with self._audit_lock:
            report = self.auditor.tick(now, self.tick_budget_s)
            # Its budgeted slice is committed: a success, whatever backlog it left.
            self.auditor.succeeded(time.time())
        if self.alerts is not None:
            push_problems(self.auditor, self.alerts, now)
        # Then prune to store.retention for a quarter of the interval at most, in short
        # transactions (ingest goes on between them); what is left, the next ticks prune.
        budget = min(PRUNE_BUDGET_S, self.config.audit_interval_ms / 4000)
        try:
            pruned = self.auditor.prune(now, budget)
        except StoreError as e:  # the tick's verdicts are saved; pruning waits for the next
            log.warning("pruning skipped: %s", e)
            return report
        if pruned is not None and (pruned.threads or pruned.units or pruned.unknown):
            log.info(
                "pruned",
                extra={
                    "threads": pruned.threads,
                    "waits": pruned.waits,
                    "units": pruned.units,
                    "unknown": pruned.unknown,
                    "done": pruned.done,
                },
            )
        return report

    def hup(self) -> None:
        """SIGHUP (on the event loop): reload the config in a task of its own."""
        if self._stopping:
            return
        task = asyncio.ensure_future(self.reload())
        self._reloads.add(task)
        task.add_done_callback(self._reloads.discard)

    async def reload(self) -> None:
        """Read the config again and take what may change while running (policies, tokens,
        limits, reports: daemon.reload.RELOADABLE); a changed key that needs a restart is
        logged by name and keeps its old value. A config with problems changes nothing."""
        if self._reread is None:
            log.warning("SIGHUP: no config to reload")
            return
        try:
            new = await run_in_threadpool(self._reread)
        except SidewatchError as e:  # ConfigError: every problem, one line each
            log.error(
                "SIGHUP: config refused, the running one stays in force: %s",
                " ".join(str(e).split()),
            )
            return
        effective, taken, refused = reloaded(self.config, new)
        for key in refused:
            log.warning(
                "SIGHUP: %s changed but takes a restart to change: its old value stays in force",
                key,
            )
        if effective.policies != self.config.policies:
            try:
                marked = await self._in_worker(self._use_policies, effective.policies)
            except StoreError as e:
                log.warning("SIGHUP: policies not reloaded, the old ones stay in force: %s", e)
                effective = replace(effective, policies=self.config.policies)
                taken.remove(key_of("policies"))
            else:
                log.info("policies reloaded: the open waits of %d threads are re-audited", marked)
        self.config = self.state.config = self.ingest.config = effective
        # Lower freshness, smaller compaction gap: the beats from now on follow it.
        self.store.heartbeat_gap_ms = effective.heartbeat_gap_ms
        log.info(
            "SIGHUP: config reloaded: %s",
            ", ".join(taken) if taken else "nothing that can change while running changed",
        )

    def _use_policies(self, policies: tuple[Policy, ...]) -> int:
        with self._audit_lock:
            return self.auditor.use_policies(policies)

    @asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        scheduler = self._scheduler = AsyncIOScheduler(timezone=UTC)
        interval = self.config.audit_interval_ms / 1000
        # The lease is claimed every half interval, so a standby takes over within two.
        for job, seconds, name in (
            (self.claim, interval / 2, "lease"),
            (self.tick, interval, "audit"),
        ):
            scheduler.add_job(
                job,
                "interval",
                seconds=seconds,
                next_run_time=datetime.now(UTC),
                max_instances=1,
                coalesce=True,
                id=name,
            )
        if self.config.report_schedule:
            scheduler.add_job(
                self.nightly_report,
                CronTrigger.from_crontab(self.config.report_schedule, timezone=UTC),
                max_instances=1,
                coalesce=True,
                id="report",
            )
        self._stopping = False
        scheduler.start()
        if self.jetstream is not None:
            self.jetstream.start()
        log.info(
            "sidewatch %s serving on %s, store %s, audit every %ss",
            __version__,
            self.config.listen,
            self.engine.url.render_as_string(hide_password=True),
            self.config.audit_interval_ms / 1000,
        )
        try:
            yield
        finally:
            self._stopping = True
            running = set(self._running)  # taken before the scheduler's shutdown cancels jobs
            if self.jetstream is not None:  # its last batch commits and is acknowledged first
                await self.jetstream.stop()
            scheduler.shutdown(wait=False)
            if running:
                log.info("waiting for the running audit tick or report to finish")
                await asyncio.gather(*running, return_exceptions=True)
            await run_in_threadpool(self.lease.release)
            self.engine.dispose()
            if self.tracer_provider is not None:
                self.tracer_provider.shutdown()  # flushes the last spans
            log.info("store closed; bye")


PRUNE_BUDGET_S = 2.0  # the longest pruning after one tick
# A tick's share of audit.interval: a long re-audit goes on over the next ticks, each
# committing its slice, so ingest, reloads and /readyz never wait for the whole of it.
TICK_BUDGET = 0.5


def _jetstream(config: Config, ingest: Ingest) -> JetStreamIngest | None:
    """The JetStream consumer (started with the app) when `nats` is configured."""
    if config.nats is None:
        return None
    try:
        from sidewatch.daemon.jetstream import JetStreamIngest  # noqa: PLC0415 - optional extra
    except ImportError as e:
        raise SidewatchError(
            f"nats is configured but its client is not installed ({e}): "
            "pip install 'sidewatch[nats]'"
        ) from e
    return JetStreamIngest(ingest, config.nats)


# Open files the daemon needs besides its connections: store connections (three files each
# on SQLite), the listening sockets, the Alertmanager and NATS clients, reports, logs.
FILES_IN_RESERVE = 128


def raise_open_files() -> int:
    """Raises the soft limit on open files to the hard limit where allowed; returns the soft
    limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as e:
            log.warning("could not raise the open-file limit from %d: %s", soft, e)
    return soft


def connection_cap(config: Config, open_files: int) -> int:
    """server.maxConnections, lowered to what the open-file limit leaves for connections."""
    room = max(1, open_files - FILES_IN_RESERVE)
    if config.max_connections > room:
        log.warning(
            "server.maxConnections %d is over what the open-file limit of %d allows: "
            "holding at most %d connections (raise the limit: ulimit -n, LimitNOFILE=)",
            config.max_connections,
            open_files,
            room,
        )
        return room
    return config.max_connections


class BoundedServer(uvicorn.Server):
    """uvicorn that calls `on_hup` on the event loop at SIGHUP (the config's reload), and
    exits within `bound_s` of the first SIGTERM or SIGINT whatever still runs (a store that
    stopped answering holds worker threads)."""

    def __init__(
        self, bound_s: float, config: uvicorn.Config, on_hup: Callable[[], None] = lambda: None
    ) -> None:
        super().__init__(config)
        self.bound_s = bound_s
        self.on_hup = on_hup
        self._bound: threading.Timer | None = None

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            with super().capture_signals():
                yield
            return
        loop = asyncio.get_running_loop()

        def hup(sig: int, frame: FrameType | None) -> None:
            loop.call_soon_threadsafe(self.on_hup)

        before = signal.signal(signal.SIGHUP, hup)
        try:
            with super().capture_signals():
                yield
        finally:
            signal.signal(signal.SIGHUP, before)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        if self._bound is None:
            self._bound = threading.Timer(self.bound_s, self._give_up)
            self._bound.daemon = True
            self._bound.start()

    def _give_up(self) -> None:
        log.error(
            "shutdown took longer than %gs (server.shutdownTimeout): exiting now", self.bound_s
        )
        for handler in logging.getLogger().handlers:
            handler.flush()
        os._exit(1)


def serve(
    config: Config,
    log_level: int = logging.INFO,
    access_log: bool = False,
    migrate: bool = True,
    reread: Callable[[], Config] | None = None,
) -> None:
    """Run until SIGTERM or Ctrl-C. Refuses a non-loopback address without tokens or TLS.
    `access_log`: one JSON line per request (uvicorn's: client, method, path, status).
    `migrate=False` refuses a store that is not at the newest migration. `reread` reads the
    config again at SIGHUP."""
    check_listen(config)
    sock = bind(config.listen)  # a taken port is one line, before anything says "serving"
    setup_logging(log_level)
    if access_log:  # asked for, so written whatever the level
        logging.getLogger("uvicorn.access").setLevel(logging.INFO)
    if not config.tokens:
        log.warning("no tokens configured: listening on loopback only, every request allowed")
    cap = connection_cap(config, raise_open_files())
    daemon = Daemon(config, migrate, reread)
    server = BoundedServer(
        config.shutdown_timeout_ms / 1000,
        uvicorn.Config(
            daemon.app,
            log_config=None,
            access_log=access_log,
            # Half the bound for requests to drain; the rest for the last tick, the JetStream
            # batch and the lease release.
            timeout_graceful_shutdown=max(1, round(config.shutdown_timeout_ms / 2000)),
            lifespan="on",
            http=head_deadline(config.request_timeout_ms / 1000, cap),
            # uvicorn believes X-Forwarded-For from 127.0.0.1 unless told otherwise: only a
            # configured proxy's is believed, so a local client cannot choose its `source`.
            proxy_headers=bool(config.trusted_proxies),
            forwarded_allow_ips=list(config.trusted_proxies),
            ssl_certfile=config.tls_cert_file,
            ssl_keyfile=config.tls_key_file,
        ),
        on_hup=daemon.hup,
    )
    server.run(sockets=[sock])
