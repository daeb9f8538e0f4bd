"""When the daemon's jobs run: the audit lease claimed every half interval, the audit tick
every interval, the nightly report by its cron (UTC); each at most once at a time, a missed
run coalesced into the next."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger

from sidewatch.config import Config

AUDIT_JOB = "audit"  # the tick's job: run at once when this replica takes the lease over

Job = Callable[[], Awaitable[None]]


def scheduled(config: Config, claim: Job, tick: Job, nightly_report: Job) -> AsyncIOScheduler:
    """The daemon's jobs on a scheduler not started yet: the claim and the tick run at once,
    then every half interval and every interval."""
    scheduler = AsyncIOScheduler(timezone=UTC)
    interval = config.audit_interval_ms / 1000
    # The lease is claimed every half interval, so a standby takes over within two.
    for job, seconds, name in (
        (claim, interval / 2, "lease"),
        (tick, interval, AUDIT_JOB),
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
    if config.report_schedule:
        scheduler.add_job(
            nightly_report,
            CronTrigger.from_crontab(config.report_schedule, timezone=UTC),
            max_instances=1,
            coalesce=True,
            id="report",
        )
    return scheduler
