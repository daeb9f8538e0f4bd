"""Hostile values written straight through the store's write path, past every check of
ingest, on real SQLite and real PostgreSQL: each unit is either stored or refused as a
property of its own data (StoreRefused, nothing of it stored, its reason the error's class
and code only). Never another exception, and never taken for an outage."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from sidewatch.core.facts import (
    Fact,
    FindingFact,
    HeartbeatFact,
    InterruptFact,
    RunFact,
    RunMark,
    SignalFact,
    SignalKind,
)
from sidewatch.errors import StoreRefused
from sidewatch.store.db import open_store
from sidewatch.store.models import Unit, table_of
from sidewatch.store.repo import Store

# What a database or its driver refuses: a NUL (PostgreSQL), a lone surrogate (both drivers),
# more than a column holds (PostgreSQL), and any code point at all.
texts = st.one_of(
    st.sampled_from(["n\x00", "\ud800", "\x00" * 3, "x" * 257, "é" * 300, "", "\x1b[2J"]),
    st.text(max_size=40),
    st.text(st.characters(exclude_categories=()), max_size=40),
    st.text(st.characters(exclude_categories=()), min_size=250, max_size=600),
)
# Integers a BIGINT cannot hold, and any other.
ints = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([2**63, -(2**63) - 1, 2**64 + 1, 10**30, -(10**30)]),
    st.integers(),
)
facts: st.SearchStrategy[Fact] = st.one_of(
    st.builds(
        RunFact, run_id=texts, thread_id=texts, mark=st.sampled_from(RunMark), at=ints, seq=ints
    ),
    st.builds(
        HeartbeatFact,
        thread_id=texts,
        at=ints,
        seq=ints,
        run_id=st.none() | texts,
        handle=st.none(),
        key=texts,
    ),
    st.builds(
        SignalFact,
        kind=st.sampled_from(SignalKind),
        at=ints,
        seq=ints,
        request_id=st.none() | texts,
        thread_id=st.none() | texts,
        interrupt_id=st.none() | texts,
        approver_ref=st.none() | texts,
        key=texts,
    ),
    st.builds(
        InterruptFact,
        thread_id=texts,
        run_id=texts,
        interrupt_id=texts,
        at=ints,
        seq=ints,
        reason=st.none() | texts,
    ),
    st.builds(FindingFact, rule=texts, at=ints, seq=ints, thread_id=st.none() | texts),
)
# A refusal names the error's class and its code, nothing else.
REASON = re.compile(r"(OverflowError|UnicodeEncodeError|[A-Za-z]+Error)( [0-9A-Z_]{5,40})?")


@pytest.fixture(scope="module")
def store(module_db_url: str) -> Iterator[Store]:
    engine = open_store(module_db_url)
    yield Store(engine)
    engine.dispose()


def _units(store: Store) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table_of(Unit))).scalar_one())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(facts, min_size=1, max_size=6))
def test_hostile_values_are_stored_or_refused_as_the_units_own(
    store: Store, written: list[Fact]
) -> None:
    before = _units(store)

    try:
        with store.unit("fuzz", 0) as writer:
            assert writer is not None
            writer.write(written, [], {"run": len(written)}, len(written), 0)
    except StoreRefused as e:
        event(f"refused: {e.reason}")
        assert REASON.fullmatch(e.reason), e.reason
        assert before == _units(store)  # refused whole: not even the unit's row
        return
    event("stored")
    assert before + 1 == _units(store)


def _run(thread: str = "t", at: int = 0) -> RunFact:
    return RunFact(run_id="r", thread_id=thread, mark=RunMark.STARTED, at=at, seq=0)


def _wide(seed: int) -> str:
    """256 characters of four UTF-8 bytes each, that do not compress."""
    return "".join(chr(0x20000 + (i * 7919 + seed * 104729) % 40000) for i in range(256))


# (fact, what SQLite makes of it, what PostgreSQL makes of it)
KNOWN = [
    pytest.param(_run(), "stored", "stored", id="plain"),
    pytest.param(_run(at=2**63), "OverflowError", "DataError 22003", id="integer-over-64-bits"),
    pytest.param(_run("n\x00"), "stored", "DataError", id="nul"),
    pytest.param(_run("x" * 257), "stored", "DataError 22001", id="over-the-column"),
    pytest.param(_run("\ud800"), "UnicodeEncodeError", "UnicodeEncodeError", id="lone-surrogate"),
    # each id fits its column, but together they are over a btree entry's 2,704 bytes: a
    # program limit, which psycopg raises as an OperationalError (its SQLSTATE decides)
    pytest.param(
        InterruptFact(thread_id=_wide(1), run_id=_wide(2), interrupt_id=_wide(3), at=0, seq=0),
        "stored",
        "OperationalError 54000",
        id="index-row-too-large",
    ),
]


@pytest.mark.parametrize(("fact", "sqlite", "postgresql"), KNOWN)
def test_what_each_store_refuses(store: Store, fact: Fact, sqlite: str, postgresql: str) -> None:
    try:
        with store.unit("known", 0) as writer:
            assert writer is not None
            writer.write([fact], [], {}, 1, 0)
        outcome = "stored"
    except StoreRefused as e:
        outcome = e.reason

    assert (sqlite if store.engine.dialect.name == "sqlite" else postgresql) == outcome


def test_two_writers_of_the_same_facts_and_key_at_once_are_no_refusal(store: Store) -> None:
    # What replicas race on: the same JetStream unit (its key) and the same facts. The second
    # writer waits for the first one's commit, then finds them stored: never a refusal.
    facts: list[Fact] = [
        _run("raced"),
        HeartbeatFact(thread_id="raced", at=1, seq=1, key="raced-beat"),
    ]
    first_wrote, outcomes = threading.Event(), dict[str, str]()

    def write(name: str, key: str | None) -> None:
        try:
            with store.unit(name, 0, key) as writer:
                if writer is not None:
                    writer.write(facts, [], {}, len(facts), 0)
                if name == "first":
                    first_wrote.set()
                    time.sleep(0.5)  # the second is blocked on our rows meanwhile
            outcomes[name] = "stored" if writer is not None else "duplicate"
        except Exception as e:
            outcomes[name] = type(e).__name__

    for key in (None, "nats:raced:0:1"):
        first = threading.Thread(target=write, args=("first", key))
        first.start()
        first_wrote.wait(5)
        write("second", key)
        first.join()
        first_wrote.clear()

        assert {"first": "stored", "second": "duplicate" if key else "stored"} == outcomes
