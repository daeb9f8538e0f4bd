"""Migration 0023 on SQLite and PostgreSQL: a store of the 0022 schema upgrades without losing
a fact or a verdict, gains `wait_state.uncertain` and the lists' index (closed, state, since,
request_id, thread_id), and marks every thread that holds a wait, its checkpoint and kept
settled waits dropped: the next tick records `uncertain` of every wait, as an audit at the
head does; the lists' running totals are filled from the rows and moved by that tick. The
downgrade gives the 0022 schema back."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, create_engine, inspect, text

from sidewatch.app.audit import Auditor
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store
from tests.app.test_checkpoint_tick import START, THREAD
from tests.daemon.test_http import MIN, SEC, heartbeat, ndjson, requested, scenario
from tests.store.test_migration_0013 import _audited, _counts, _to
from tests.store.test_migration_0017 import _count
from tests.store.test_wait_totals import counted
from tests.store.test_wait_totals import kept as totals

NOW = START + 100_000


def _uncertain(engine: Engine) -> dict[tuple[str, str], bool]:
    with engine.connect() as c:
        rows = c.execute(text("SELECT thread_id, request_id, uncertain FROM wait_state"))
        return {(t, r): bool(u) for t, r, u in rows}


def _index(engine: Engine) -> list[str | None]:
    found = [
        i
        for i in inspect(engine).get_indexes("wait_state")
        if i["name"] == "ix_wait_state_open_since"
    ]
    return list(found[0]["column_names"])


def test_a_0022_store_upgrades_without_loss_and_records_uncertain_at_the_next_tick(
    blank_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _audited(blank_db_url, monkeypatch)  # a long thread with a checkpoint
    # the reference six, and a wait whose route was never reported (uncertain)
    unsure = [
        *requested("t-unsure", "int", "rotate_keys", NOW - 30 * MIN, NOW + 60 * MIN),
        heartbeat("t-unsure", NOW - 30 * SEC),
    ]
    body = ndjson([*scenario(NOW), *unsure])
    Ingest(store, ref_protector(store.engine, Config()), Config()).body("seven", body, NOW)
    policies = Config().policies
    Auditor(store, policies).tick(NOW)
    audited = _uncertain(store.engine)
    assert any(audited.values()) and not all(audited.values())  # both kinds recorded
    store.engine.dispose()
    engine = create_engine(blank_db_url)
    _to(engine, "0022")
    assert "uncertain" not in {c["name"] for c in inspect(engine).get_columns("wait_state")}
    assert ["closed", "state", "since"] == _index(engine)
    kept = _counts(engine)

    store = Store(open_store(blank_db_url))  # upgraded to the head

    assert kept == _counts(store.engine)
    assert ["closed", "state", "since", "request_id", "thread_id"] == _index(store.engine)
    assert not any(_uncertain(store.engine).values())  # not known yet: the default
    assert counted(store) == totals(store)  # the lists' totals, filled from the rows
    assert (0, 0) == (
        _count(store.engine, "thread_checkpoint"),
        _count(store.engine, "settled_wait"),
    )
    with store.engine.connect() as c:
        marked = set(c.execute(text("SELECT thread_id FROM dirty_thread")).scalars())
    assert {THREAD, *(t for t, _ in audited)} == marked
    Auditor(store, policies).tick(NOW)
    assert audited == _uncertain(store.engine)
    assert counted(store) == totals(store)  # moved by the tick that recorded `uncertain`
    store.engine.dispose()
    engine.dispose()
