"""Store-wide metrics come only from the current, verified lease term: nothing before the
term's first tick, nothing from a holder whose hold ran out while it was paused; every
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


def test_store_wide_families_wait_for_the_terms_first_tick_and_the_acquisition_is_logged(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="sidewatch")
    daemon = Daemon(Config(db_url=pg_url, report_schedule=None))
    try:
        assert f"holds the audit lease (epoch {daemon.lease.epoch})" in caplog.text
        before = generate_latest(daemon.state.registry).decode()
        asyncio.run(daemon.tick())
        after = generate_latest(daemon.state.registry).decode()
    finally:
        daemon.lease.release()
        daemon.engine.dispose()

    assert "sidewatch_audit_lease_held 1.0" in before
    assert "sidewatch_waits{" not in before
    assert "sidewatch_waits{" in after
