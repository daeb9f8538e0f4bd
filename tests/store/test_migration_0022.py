"""Migration 0022 on SQLite and PostgreSQL: a store of the 0021 schema, its routes stored
without a channel, upgrades without losing a row; its routes read back with none, and a route
ingested afterwards keeps its channel; the downgrade gives the 0021 schema back, the routes
kept without their channels."""

from __future__ import annotations

import orjson
from sqlalchemy import Engine, create_engine, inspect, text

from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store
from tests.store.test_migration_0013 import _to
from tests.store.test_migration_0017 import _count

AT = 1_785_000_000_000


def _route(interrupt: str, **value: object) -> bytes:
    return orjson.dumps(
        {
            "type": "CUSTOM",
            "name": "sidewatch.route",
            "value": {"threadId": "t", "interruptId": interrupt, "delivered": False, **value},
            "timestamp": AT,
        }
    )


def _channels(engine: Engine) -> dict[str, str | None]:
    with engine.connect() as c:
        rows = c.execute(text("SELECT interrupt_id, channel FROM signal"))
        return {str(i): ch for i, ch in rows}


def _columns(engine: Engine) -> list[str]:
    return [c["name"] for c in inspect(engine).get_columns("signal")]


def test_a_0021_store_upgrades_with_its_routes_and_keeps_channels_from_then_on(
    blank_db_url: str,
) -> None:
    store = Store(open_store(blank_db_url))
    store.engine.dispose()
    engine = create_engine(blank_db_url)
    _to(engine, "0021")
    assert "channel" not in _columns(engine)
    with engine.begin() as c:  # a route as 0021 stored it
        c.execute(
            text(
                "INSERT INTO signal (key, kind, thread_id, interrupt_id, delivered, acknowledged,"
                " at, seq) VALUES ('k-old', 'route', 't', 'old', false, false, :at, 1)"
            ),
            {"at": AT},
        )
    engine.dispose()

    store = Store(open_store(blank_db_url))  # upgraded to the head
    Ingest(store, ref_protector(store.engine, Config()), Config()).body(
        "test", _route("new", channel="slack"), AT
    )

    assert "channel" in _columns(store.engine)
    assert {"old": None, "new": "slack"} == _channels(store.engine)
    store.engine.dispose()


def test_the_downgrade_to_0021_keeps_the_routes_without_their_channels(blank_db_url: str) -> None:
    store = Store(open_store(blank_db_url))
    Ingest(store, ref_protector(store.engine, Config()), Config()).body(
        "test", _route("new", channel="slack"), AT
    )
    store.engine.dispose()
    engine = create_engine(blank_db_url)

    _to(engine, "0021")

    assert "channel" not in _columns(engine)
    assert 1 == _count(engine, "signal")
    _to(engine, "0022", up=True)
    assert {"new": None} == _channels(engine)
    engine.dispose()
