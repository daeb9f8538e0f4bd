"""Migration 0019 on SQLite and PostgreSQL: a store with a long thread bound to a service by
one of its runs goes down to 0018 and up again without losing a row, the (thread, run) index
of service bindings dropped and made again; its checkpoint is kept, and the verdicts are
the same at the head."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, inspect, text

from sidewatch.app import evaluate as evaluation
from sidewatch.app.audit import Auditor
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store
from tests.app.test_checkpoint_tick import BEATING, RUNS, START, THREAD, _ingest, _run, _service
from tests.store.test_migration_0013 import _counts, _to

INDEX = "ix_service_binding_thread_run"


def _indexes(engine: object) -> set[str]:
    return {str(i["name"]) for i in inspect(engine).get_indexes("service_binding")}


def test_a_store_with_run_bound_services_goes_down_to_0018_and_up_without_loss(
    blank_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(evaluation, "LONG", 50)
    store = Store(open_store(blank_db_url))
    lines = [line for i in range(1, RUNS + 1) for line in _run(i)]
    lines.append(_service(START + RUNS * 1000 + 1, threadId=THREAD, runId=f"run-{RUNS}"))
    _ingest(store, [*lines, _service(START + 90_000)], START)
    Auditor(store, (BEATING,)).tick(START + 100_000)
    assert INDEX in _indexes(store.engine)
    kept = _counts(store.engine)
    with store.engine.connect() as c:
        (before,) = evaluation.evaluate_threads(
            c, [THREAD], lambda a, r: BEATING, START + 200_000, keep=False
        )
        checkpoint = c.execute(text("SELECT * FROM thread_checkpoint")).all()
    assert before.resumed
    store.engine.dispose()
    engine = create_engine(blank_db_url)

    _to(engine, "0018")
    assert INDEX not in _indexes(engine)
    assert kept == _counts(engine)
    with engine.connect() as c:
        assert 1 == c.execute(text("SELECT count(*) FROM service_binding")).scalar_one()
    engine.dispose()

    # Up to 0020, where the index is made again and the checkpoint is as it was; then to the
    # head, whose code reads the store (it reads columns later migrations add; 0021 has the
    # checkpoint taken again): the verdicts are those of before the round trip (those of
    # the waits the checkpoint left open; without it every wait of the thread is evaluated).
    engine = create_engine(blank_db_url)
    _to(engine, "0020", up=True)
    assert INDEX in _indexes(engine)
    assert kept == _counts(engine)
    with engine.connect() as c:
        assert checkpoint == c.execute(text("SELECT * FROM thread_checkpoint")).all()
    _to(engine, "head", up=True)
    with engine.connect() as c:
        (out,) = evaluation.evaluate_threads(
            c, [THREAD], lambda a, r: BEATING, START + 200_000, keep=False
        )
    verdicts = {w.evidence.request_id: w.verdict for w in out.result.waits}
    assert before.result.waits
    assert all(w.verdict == verdicts[w.evidence.request_id] for w in before.result.waits)
    engine.dispose()
