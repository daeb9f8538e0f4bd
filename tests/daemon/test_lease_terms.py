"""Store-wide metrics come only from the current, verified lease term: nothing from a standby,
nothing before the term has its own counters (loaded from the store as it began, or made by
its first tick), nothing from a holder whose hold ran out while it was paused; every
acquisition is logged with its epoch. On the running PostgreSQL server."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from prometheus_client import generate_latest

from sidewatch.config import Config
from sidewatch.daemon.serve import Daemon
from sidewatch.store.db import open_store
from sidewatch.store.lease import AuditLease


def test_a_hold_that_ran_out_is_not_verified_before_the_next_claim(pg_url: str) -> None:
    engine = open_store(pg_url)
    try:
        lease = AuditLease(engine, ttl_ms=400)
        assert lease.claim() and lease.verified
        time.sleep(0.6)  # as a paused process would: no claim meanwhile
        assert lease.held  # what the last claim found
        assert not lease.verified  # but the hold has run out
        assert lease.claim() and lease.verified
    finally:
        engine.dispose()


def test_store_wide_families_come_only_from_the_holder_s_own_term_and_the_acquisition_is_logged(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="sidewatch")
    holder = Daemon(Config(db_url=pg_url, report_schedule=None))
    standby = Daemon(Config(db_url=pg_url, report_schedule=None))
    try:
        assert f"holds the audit lease (epoch {holder.lease.epoch})" in caplog.text
        assert not standby.lease.held
        as_standby = generate_latest(standby.state.registry).decode()
        holder.lease.release()
        asyncio.run(standby.claim())  # takes the lease over: a new term, counters reloaded
        took_over = generate_latest(standby.state.registry).decode()
        epoch = standby.lease.epoch
        asyncio.run(standby.tick())
        after_tick = generate_latest(standby.state.registry).decode()
    finally:
        standby.lease.release()
        for d in (holder, standby):
            d.engine.dispose()

    assert "sidewatch_audit_lease_held 0.0" in as_standby
    assert "sidewatch_waits{" not in as_standby
    assert epoch is not None and f"holds the audit lease (epoch {epoch})" in caplog.text
    assert "sidewatch_audit_lease_held 1.0" in took_over
    assert "sidewatch_waits{" in took_over
    assert "sidewatch_waits{" in after_tick
