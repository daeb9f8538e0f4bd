"""Migration 0024 on SQLite and PostgreSQL: a store of the 0023 schema, holding a wait, upgrades
without losing a row; the runs stored before have no trace context (their waits keep a root
span), a run ingested afterwards keeps its own; the downgrade gives the 0023 schema back, the
facts kept and the contexts dropped."""

from __future__ import annotations

import orjson
from sqlalchemy import Engine, create_engine, inspect, text

from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store
from sidewatch.store.traces import run_traces
from tests.store.test_migration_0013 import _to

AT = 1_785_000_000_000
PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def _run(run: str, **trace: str) -> bytes:
    outcome = {"type": "interrupt", "interrupts": [{"id": f"i-{run}", "reason": "tool_call"}]}
    lines = [
        {"threadId": "t", "runId": run, "messages": [], "timestamp": AT, **trace},
        {
            "type": "RUN_FINISHED",
            "threadId": "t",
            "runId": run,
            "timestamp": AT,
            "outcome": outcome,
        },
    ]
    return b"\n".join(orjson.dumps(line) for line in lines)


def _ingest(store: Store, body: bytes) -> None:
    Ingest(store, ref_protector(store.engine, Config()), Config()).body("test", body, AT)


def _counts(engine: Engine) -> tuple[int, int]:
    with engine.connect() as c:
        interrupts = c.execute(text("SELECT count(*) FROM interrupt")).scalar()
        runs = c.execute(text("SELECT count(*) FROM run_fact")).scalar()
    return int(interrupts or 0), int(runs or 0)


def test_a_0023_store_upgrades_and_keeps_trace_contexts_from_then_on(blank_db_url: str) -> None:
    store = Store(open_store(blank_db_url))
    store.engine.dispose()
    engine = create_engine(blank_db_url)
    _to(engine, "0023")
    assert "run_trace" not in inspect(engine).get_table_names()
    with engine.begin() as c:  # a run's input as 0023 stored it
        c.execute(
            text(
                "INSERT INTO run_fact (run_id, thread_id, mark, at, seq) "
                "VALUES ('old', 't', 'input', :at, 1)"
            ),
            {"at": AT},
        )
    engine.dispose()

    store = Store(open_store(blank_db_url))  # upgraded to the head
    _ingest(store, _run("new", traceparent=PARENT, tracestate="v=1"))

    assert {"new": (PARENT, "v=1")} == run_traces(store.engine, "t", ["old", "new"])
    assert (1, 3) == _counts(store.engine)
    store.engine.dispose()


def test_the_downgrade_to_0023_drops_the_contexts_and_keeps_the_facts(blank_db_url: str) -> None:
    store = Store(open_store(blank_db_url))
    _ingest(store, _run("r1", traceparent=PARENT))
    before = _counts(store.engine)
    store.engine.dispose()
    engine = create_engine(blank_db_url)

    _to(engine, "0023")

    assert "run_trace" not in inspect(engine).get_table_names()
    assert (1, 2) == before == _counts(engine)
    engine.dispose()
