"""The audit lease on SQLite and PostgreSQL: one holder, takeover after expiry, and a holder
that lost it cannot write verdicts (so no transition is ever recorded twice)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from sidewatch.app.audit import Auditor
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.store.db import open_store
from sidewatch.store.lease import AuditLease, LeaseLost
from sidewatch.store.repo import Store
from sidewatch.store.transitions import count_moves
from tests.app.test_auditor import SEED, SEED_AT

TTL_MS = 200


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    engine = open_store(db_url)
    yield engine
    engine.dispose()


def _expire() -> None:
    time.sleep(3 * TTL_MS / 1000)


def test_one_replica_holds_the_lease_and_renews_it(engine: Engine) -> None:
    a, b = AuditLease(engine, TTL_MS, "a"), AuditLease(engine, TTL_MS, "b")

    claims = [a.claim(), b.claim(), a.claim(), b.claim()]

    assert [True, False, True, False] == claims
    assert (1, None) == (a.epoch, b.epoch)


def test_another_replica_takes_an_expired_lease_over_and_fences_the_old_holder(
    engine: Engine,
) -> None:
    a, b = AuditLease(engine, TTL_MS, "a"), AuditLease(engine, TTL_MS, "b")
    a.claim()
    _expire()

    took = b.claim()
    with pytest.raises(LeaseLost), engine.begin() as conn:
        a.fence(conn)

    assert (True, 2) == (took, b.epoch)
    assert (False, None) == (a.held, a.epoch)
    assert not a.claim()


def test_a_holder_that_stalled_but_was_not_replaced_keeps_its_lease(engine: Engine) -> None:
    a, b = AuditLease(engine, TTL_MS, "a"), AuditLease(engine, TTL_MS, "b")
    a.claim()
    _expire()

    renewed = a.claim()  # nobody took it meanwhile: same epoch, no takeover
    with engine.begin() as conn:
        a.fence(conn)

    assert (True, 1) == (renewed, a.epoch)
    assert not b.claim()


def test_a_released_lease_is_taken_at_once(engine: Engine) -> None:
    a, b = AuditLease(engine, 60_000, "a"), AuditLease(engine, 60_000, "b")
    a.claim()

    a.release()

    assert b.claim()
    assert not a.held


def test_a_fenced_out_auditor_records_nothing_and_its_successor_records_once(
    db_url: str,
) -> None:
    engines = [open_store(db_url), open_store(db_url)]
    try:
        store = Store(engines[0])
        Ingest(store, ref_protector(engines[0], Config()), Config()).body(
            "seed", SEED.read_bytes(), SEED_AT
        )
        old_lease = AuditLease(engines[0], TTL_MS, "old")
        old_lease.claim()
        old = Auditor(store, Config().policies, lease=old_lease)
        _expire()
        new_lease = AuditLease(engines[1], TTL_MS, "new")
        new_lease.claim()
        new = Auditor(Store(engines[1]), Config().policies, lease=new_lease)

        with pytest.raises(LeaseLost):
            old.tick(SEED_AT)
        after_old = _transitions(engines[0])
        report = new.tick(SEED_AT)
        after_new = _transitions(engines[0])
        again = Auditor(Store(engines[1]), Config().policies, lease=new_lease).tick(SEED_AT)
    finally:
        for e in engines:
            e.dispose()

    assert 0 == after_old
    assert report.transitions == after_new > 0
    assert 0 == again.transitions


def _transitions(engine: Engine) -> int:
    """Recorded transitions (a row a recording holds each of its own)."""
    with engine.connect() as conn:
        return sum(count_moves(conn).values())
