"""The store on SQLite and PostgreSQL: migrations, natural-key upserts, whole-unit commits."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text

from sidewatch.app.audit import audit
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.core.policy import DEFAULT_POLICY
from sidewatch.errors import StoreError
from sidewatch.ingest.agui import Interpreter
from sidewatch.ingest.reader import frames
from sidewatch.store.db import open_store, upgrade
from sidewatch.store.models import metadata
from sidewatch.store.repo import Store
from tests.storerows import fact_counts

FIXTURE = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "seed-audit.ndjson"
AT = 1_785_083_400_000  # 2026-07-26T16:30:00Z
TABLES = {
    "unit",
    "line_count",
    "reject",
    "interrupt",
    "tool_call",
    "run_fact",
    "answer",
    "tool_result",
    "signal",
    "heartbeat",
    "finding",
    "meta",
    "alembic_version",
    "wait_state",
    "transition",
    "dirty_thread",
    "legacy_resume",
    "lease",
    "service_heartbeat",
    "service_heartbeat_change",
    "service_binding",
    "pruned_total",
    "prune_retry",
    "subagent",
    "thread_checkpoint",
    "settled_wait",
    "running_total",
    "run_trace",
}


def test_the_migration_creates_every_table(blank_db_url: str) -> None:
    engine = open_store(blank_db_url)

    tables = set(inspect(engine).get_table_names())
    engine.dispose()

    assert TABLES == tables


def test_opening_a_migrated_store_again_is_a_no_op(blank_db_url: str) -> None:
    open_store(blank_db_url).dispose()
    engine = open_store(blank_db_url)

    upgrade(engine)
    engine.dispose()


def test_the_reference_audit_is_the_same_on_every_store(db_url: str) -> None:
    engine = open_store(db_url)
    store = Store(engine)
    Ingest(store, ref_protector(engine, Config()), Config()).body("seed", FIXTURE.read_bytes(), AT)

    states = {
        a.verdict.request_id: a.verdict.state.value for a in audit(store, (DEFAULT_POLICY,), AT)
    }
    engine.dispose()

    assert {
        "thread-export/int-export": "WAITING",
        "thread-delete/int-delete": "STALE",
        "thread-rotation/int-rotation": "UNROUTABLE",
        "thread-invoice/int-invoice": "ORPHANED",
        "thread-deploy/int-deploy": "STUCK_AFTER_DECISION",
        "thread-message/int-message": "CLOSED_BY_DECLINE",
    } == states


def test_re_delivered_facts_are_upserts_that_change_nothing(db_url: str) -> None:
    engine = open_store(db_url)
    store = Store(engine)
    ingest = Ingest(store, ref_protector(engine, Config()), Config())
    ingest.body("seed", FIXTURE.read_bytes(), AT)
    before = fact_counts(store)

    ingest.body("seed again", FIXTURE.read_bytes(), AT + 5_000)
    after = fact_counts(store)
    engine.dispose()

    assert before == after
    assert 6 == after["interrupt"]


def test_a_unit_whose_key_is_stored_is_a_duplicate_and_stores_nothing_again(
    db_url: str,
) -> None:
    engine = open_store(db_url)
    store = Store(engine)
    ingest = Ingest(store, ref_protector(engine, Config()), Config())
    first = ingest.body("nats:S", FIXTURE.read_bytes(), AT, key="nats:S:1:7")
    again = ingest.body("nats:S", FIXTURE.read_bytes(), AT + 9, key="nats:S:1:7")
    other = ingest.body("nats:S", FIXTURE.read_bytes(), AT + 9, key="nats:S:1:8")
    with engine.connect() as conn:
        units = conn.execute(text("SELECT key, accepted FROM unit ORDER BY id")).all()
    engine.dispose()

    assert (False, True, False) == (first.duplicate, again.duplicate, other.duplicate)
    assert (0, {}) == (again.accepted, again.kinds)
    assert [("nats:S:1:7", 50), ("nats:S:1:8", 50)] == [tuple(u) for u in units]


def test_a_unit_that_fails_midway_stores_nothing(db_url: str) -> None:
    engine = open_store(db_url)
    store = Store(engine)
    body = FIXTURE.read_bytes()

    with pytest.raises(RuntimeError), store.unit("doomed", AT) as writer:
        interp = Interpreter(AT, writer.seq_base, lambda ref: ref)
        for n, raw in frames(body):
            interp.feed(n, raw)
        res = interp.finish()
        writer.write(res.facts, [], res.kinds, res.accepted, res.skipped)
        raise RuntimeError("the process is cancelled here")
    counts = fact_counts(store)
    engine.dispose()

    assert {name: 0 for name in counts} == counts


def test_an_unreachable_store_is_a_store_error() -> None:
    with pytest.raises(StoreError, match="unavailable"):
        open_store("postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=2")


def test_the_migrations_produce_exactly_the_models_schema(blank_db_url: str) -> None:
    engine = open_store(blank_db_url)

    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), metadata)
    engine.dispose()

    assert [] == diff
