"""`sidewatch serve`: the HTTP API on uvicorn and the scheduled auditor on APScheduler.

SIGTERM (or Ctrl-C) stops accepting connections, drains in-flight requests, lets a running
audit tick finish, and closes the store; SIGHUP reloads the config (see daemon.reload).
Everything the daemon knows is in the store, so a restart continues from there with nothing
lost or counted twice."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import uvicorn
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool

from sidewatch import __version__
from sidewatch.app.audit import Auditor, TickReport, push_problems
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.app.read import Read
from sidewatch.app.report import report, write_reports
from sidewatch.config import Config
from sidewatch.core.policy import Policy
from sidewatch.daemon.http import AppState, create_app
from sidewatch.daemon.listen import bind, check_listen
from sidewatch.daemon.logs import setup_logging
from sidewatch.daemon.protocol import head_deadline
from sidewatch.daemon.reload import key_of, reloaded
from sidewatch.daemon.schedule import AUDIT_JOB, scheduled
from sidewatch.daemon.selfwatch import SelfCollector
from sidewatch.daemon.server import BoundedServer, connection_cap, raise_open_files
from sidewatch.daemon.ui import AUDIT, audit_command
from sidewatch.daemon.writes import cause
from sidewatch.errors import LeaseLost, SidewatchError, StoreError, install_hint
from sidewatch.exporters.alertmanager import AlertmanagerPush
from sidewatch.exporters.otel import from_environment
from sidewatch.exporters.prometheus import AlertPushCollector, SnapshotCollector
from sidewatch.store.db import Limits, open_store, require_head
from sidewatch.store.lease import AuditLease
from sidewatch.store.repo import Store
from sidewatch.store.traces import run_traces

if TYPE_CHECKING:
    from sidewatch.daemon.jetstream import JetStreamIngest

log = logging.getLogger("sidewatch")
T = TypeVar("T")


class _BuildInfo(Collector):
    def collect(self) -> Iterator[Metric]:
        info = GaugeMetricFamily(
            "sidewatch_build_info", "sidewatch's version (always 1).", labels=["version"]
        )
        info.add_metric([__version__], 1)
        yield info


@dataclass
class _TickTimes:
    """For the prompt tick after ingest (`Daemon.ingested`): whether a tick runs, whether an
    ingest came during it, when it started, and when the last one ended and how long it took
    (monotonic seconds)."""

    running: bool = False
    again: bool = False
    started: float = 0.0
    ended: float = 0.0
    seconds: float = 0.0


class Daemon:
    """The pieces of a running daemon, wired once; `app` is the ASGI application."""

    def __init__(
        self,
        config: Config,
        migrate: bool = True,
        reread: Callable[[], Config] | None = None,
        audit_command: str = AUDIT,
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
        )
        if not migrate:
            try:
                require_head(self.engine)
            except StoreError:
                self.engine.dispose()
                raise
        self.store = Store(self.engine, config.heartbeat_gap_ms)
        traces = from_environment(os.environ, partial(run_traces, self.engine))
        self.tracer_provider = traces[1] if traces else None
        # Held 1.25 intervals and renewed every half interval (2.5 renewals per lease); a
        # standby also claims every half interval, so it takes over within 1.75 intervals of
        # the holder's last renewal.
        self.lease = AuditLease(self.engine, ttl_ms=config.audit_interval_ms * 5 // 4)
        self._claim_failed: str | None = None  # the store's reason the last claim failed
        self._standby_said = False  # the log said this replica is a standby, since it last held
        # The lease term whose store-wide state the snapshot holds: loaded from the store when
        # the term began, or made by one of its ticks. Another term's is never served.
        self._snapshot_epoch: int | None = None
        self._first_claim()  # before the counters load: one that takes the lease needs no reload
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
            ingested=self.ingested,
            audit_command=audit_command,
        )
        self.jetstream = _jetstream(config, self.ingest)
        if self.jetstream is not None:
            self.jetstream.on_stored = self.ingested
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
        self._ticks = _TickTimes()
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
        if held:
            self._standby_said = False
        if held and self.lease.epoch != epoch:
            log.info("holds the audit lease (epoch %s): this replica audits", self.lease.epoch)
            try:
                await run_in_threadpool(self.auditor.reload)
                self._snapshot_epoch = self.lease.epoch
            except StoreError as e:  # the next claim renews, the next tick retries
                log.warning("could not load the counters: %s", e)
            if self._scheduler is not None:
                self._scheduler.modify_job(AUDIT_JOB, next_run_time=datetime.now(UTC))
        elif not held:
            if epoch is not None:
                log.warning("lost the audit lease: another replica audits now")
            self._say_standby()

    def _first_claim(self) -> None:
        """The claim at start, and what it makes this replica, said in the log."""
        try:
            if self.lease.claim():
                log.info("holds the audit lease (epoch %s): this replica audits", self.lease.epoch)
            else:
                self._say_standby()
        except StoreError as e:
            self._claim_failed = e.reason
            log.warning("audit lease not claimed yet: %s", e)

    def _say_standby(self) -> None:
        """Log once, at start or when it becomes one, that this replica is a standby."""
        if not self._standby_said:
            log.info(STANDBY)
            self._standby_said = True

    def ingested(self) -> None:
        """New lines were stored through this replica (HTTP or JetStream; on the event loop):
        audit them within PROMPT_DELAY_S instead of at the next interval, so the API's
        transitions and /metrics agree with the list at once. Debounced: a burst of units
        makes one tick, and prompt ticks are at least PROMPT_GAP_S (or the last tick's own
        length, if longer) apart, so steady ingest never keeps the auditor busy more than half
        the time. Only the lease holder audits: a standby's ingest waits for its tick."""
        scheduler = self._scheduler
        if self._stopping or scheduler is None or not self.lease.held:
            return
        ticks = self._ticks
        if ticks.running:  # the running tick may have read before this unit: another after it
            ticks.again = True
            return
        gap = max(PROMPT_GAP_S, ticks.seconds)
        wait = max(PROMPT_DELAY_S, ticks.ended + gap - time.monotonic())
        due = datetime.now(UTC) + timedelta(seconds=wait)
        job = scheduler.get_job(AUDIT_JOB)
        if job is not None and job.next_run_time is not None and job.next_run_time > due:
            scheduler.modify_job(AUDIT_JOB, next_run_time=due)

    def _close_held(self) -> None:
        """Stopping: what ingest holds for a run's end still to come is closed in a unit of
        its own (the memory is lost with the process); a store outage loses it, logged."""
        try:
            if self.ingest.close_held("shutdown", int(time.time() * 1000)) is not None:
                log.info("closed what ingest held for runs not ended")
        except SidewatchError as e:
            log.warning("could not close what ingest held for runs not ended: %s", e)

    async def tick(self) -> None:
        """One audit tick (`_tick`), and the prompt tick an ingest during it asked for."""
        ticks = self._ticks
        try:
            await self._tick()
        finally:
            if ticks.running:
                ticks.running = False
                ticks.ended = time.monotonic()
                ticks.seconds = ticks.ended - ticks.started
                if ticks.again:
                    self.ingested()

    async def _tick(self) -> None:
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
        self._ticks.running, self._ticks.again = True, False
        self._ticks.started = time.monotonic()
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
        scheduler = self._scheduler = scheduled(
            self.config, self.claim, self.tick, self.nightly_report
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
            await run_in_threadpool(self._close_held)
            self.engine.dispose()
            if self.tracer_provider is not None:
                self.tracer_provider.shutdown()  # flushes the last spans
            log.info("store closed; bye")


PRUNE_BUDGET_S = 2.0  # the longest pruning after one tick
# The prompt tick after ingest: this long after the unit (a burst makes one tick), and at least
# this long after the previous tick ended.
PROMPT_DELAY_S = 0.25
PROMPT_GAP_S = 1.0
STANDBY = (
    "standby: another replica holds the audit lease; this replica ingests and serves reads, "
    "and takes the lease over if the holder stops renewing it"
)
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
            f"nats is configured but its client is not installed ({e}): {install_hint('nats')}"
        ) from e
    return JetStreamIngest(ingest, config.nats)


def serve(
    config: Config,
    log_level: int = logging.INFO,
    access_log: bool = False,
    migrate: bool = True,
    reread: Callable[[], Config] | None = None,
    config_path: str | None = None,
) -> None:
    """Run until SIGTERM or Ctrl-C. Refuses a non-loopback address without tokens or TLS.
    `access_log`: one JSON line per request (uvicorn's: client, method, path, status).
    `migrate=False` refuses a store that is not at the newest migration. `reread` reads the
    config again at SIGHUP; `config_path` is named in the wait pages' `audit` line."""
    check_listen(config)
    sock = bind(config.listen)  # a taken port is one line, before anything says "serving"
    setup_logging(log_level)
    if access_log:  # asked for, so written whatever the level
        logging.getLogger("uvicorn.access").setLevel(logging.INFO)
    if not config.tokens:
        log.warning("no tokens configured: listening on loopback only, every request allowed")
    cap = connection_cap(config, raise_open_files())
    daemon = Daemon(config, migrate, reread, audit_command(config_path, config.db_url))
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
