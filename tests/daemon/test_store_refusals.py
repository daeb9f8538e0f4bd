"""A unit whose data the store refuses is a property of the unit, not an outage: HTTP answers
400 and the CLI reports the file and goes on (JetStream terminates it: test_nats), the units
after it land, and no answer or log line holds a statement, a parameter or a value. A real
outage is still a 503. Every refusal is the real database's: after ingest's own checks a fact
is given a value the database cannot hold (an integer over 64 bits; a NUL on PostgreSQL), or
the store is given a constraint that refuses one thread."""

from __future__ import annotations

import dataclasses
import logging
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from sidewatch.cli.main import cli
from sidewatch.config import Config
from sidewatch.core.facts import Fact
from sidewatch.daemon.logs import JsonLogs
from sidewatch.daemon.serve import Daemon
from sidewatch.ingest.agui import Interpreter, UnitResult
from sidewatch.ingest.reader import Framed
from sidewatch.store.db import open_store
from tests.daemon.test_http import (
    EXPECTED_STATES,
    MIN,
    NDJSON,
    SUMMARY,
    ndjson,
    requested,
    scenario,
    states,
    store_outage,
)
from tests.storefaults import refusing_thread

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette's TestClient prefers httpx2 (see test_http)
    from starlette.testclient import TestClient

POISON = "poison-7f3a9c"  # the thread whose facts the store refuses
OVER = 2**63 + 7  # over a BIGINT: SQLite's driver and PostgreSQL both refuse it
# What an answer or a log line must never hold: the refused values, the statement, parameters.
LEAKS = (POISON, str(OVER), "INSERT", "[SQL", "parameters", "DETAIL", "\\u0000", "\x00")


def _poisoned(change: Callable[[Fact], Fact]) -> type[Interpreter]:
    """The real interpreter, but each fact of thread POISON reaches the store `change`d."""

    class Poisoned(Interpreter):
        def read(self, framed: Framed) -> UnitResult:
            res = super().read(framed)
            res.facts = [
                change(f) if getattr(f, "thread_id", None) == POISON else f for f in res.facts
            ]
            return res

    return Poisoned


def _over(fact: Fact) -> Fact:
    return dataclasses.replace(fact, at=OVER)


def _nul(fact: Fact) -> Fact:
    return dataclasses.replace(fact, thread_id=POISON + "\x00")  # type: ignore[arg-type]


@pytest.fixture
def now() -> int:
    return int(time.time()) * 1000


@pytest.fixture
def daemon(db_url: str) -> Iterator[Daemon]:
    # TestClient sends `Host: testserver`, which a token-less daemon refuses unless named.
    made = Daemon(dataclasses.replace(Config(), db_url=db_url, allowed_hosts=("testserver",)))
    yield made
    made.engine.dispose()


@pytest.fixture(params=["integer over 64 bits", "constraint"])
def refusal(
    request: pytest.FixtureRequest, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """How the store comes to refuse thread POISON's facts."""
    if request.param == "constraint":
        with refusing_thread(db_url, POISON):
            yield "constraint"
        return
    monkeypatch.setattr("sidewatch.ingest.agui.Interpreter", _poisoned(_over))
    yield str(request.param)


def _poison_body(now: int) -> bytes:
    # a good wait first: the unit is refused whole, its good lines with it
    return ndjson(
        [
            *requested("thread-good", "int-good", "export", now - 5 * MIN, now + MIN),
            *requested(POISON, "int-poison", "export", now - 2 * MIN, now + MIN),
        ]
    )


def _refused_then_good(
    daemon: Daemon, caplog: pytest.LogCaptureFixture, now: int
) -> tuple[int, str, dict[str, str], int]:
    """Post the poisoned unit twice, then the good scenario, and audit: (the refusal's status
    and error, the waits' states, /readyz's status)."""
    client = TestClient(daemon.app)
    with caplog.at_level(logging.WARNING):
        refused = client.post("/v1/events", content=_poison_body(now), headers=NDJSON)
        again = client.post("/v1/events", content=_poison_body(now), headers=NDJSON)
    good = client.post("/v1/events", content=ndjson(scenario(now)), headers=NDJSON)
    daemon.auditor.tick(now)
    ready = client.get("/readyz")
    assert refused.text == again.text  # refused again, the same way
    assert (200, SUMMARY) == (good.status_code, good.json())
    return refused.status_code, refused.json()["error"], states(client), ready.status_code


def test_a_unit_the_store_refuses_is_400_and_the_units_after_it_land(
    daemon: Daemon,
    refusal: str,
    caplog: pytest.LogCaptureFixture,
    db_url: str,
    now: int,
) -> None:
    status, error, after, ready = _refused_then_good(daemon, caplog, now)

    pg = db_url.startswith("postgresql")
    said = {
        ("integer over 64 bits", False): "OverflowError",
        ("integer over 64 bits", True): "DataError 22003",
        ("constraint", False): "IntegrityError SQLITE_CONSTRAINT_TRIGGER",
        ("constraint", True): "IntegrityError 23514",
    }[refusal, pg]
    assert 400 == status
    assert (
        f"the store refused this unit's data ({said}); nothing of this body was stored, "
        "do not retry it unchanged"
    ) == error
    assert EXPECTED_STATES == after  # neither of the refused unit's waits was stored
    assert 200 == ready  # a refused unit is no outage
    logged = f"ingest from http:testclient refused by the store ({said}); nothing stored"
    assert 2 == caplog.text.count(logged)
    for leak in LEAKS:
        assert leak not in caplog.text


# PostgreSQL only: SQLite stores a NUL in a string.
@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_a_nul_in_an_id_that_reaches_postgresql_is_400_not_503(
    daemon: Daemon,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    db_url: str,
    now: int,
) -> None:
    monkeypatch.setattr("sidewatch.ingest.agui.Interpreter", _poisoned(_nul))
    status, error, after, ready = _refused_then_good(daemon, caplog, now)

    assert (400, 200) == (status, ready)
    assert error.startswith("the store refused this unit's data (DataError);")
    assert EXPECTED_STATES == after
    for leak in LEAKS:
        assert leak not in error
        assert leak not in caplog.text


def test_an_outage_is_still_503_and_says_the_store_reason_never_the_statement(
    daemon: Daemon, caplog: pytest.LogCaptureFixture, db_url: str, now: int
) -> None:
    client = TestClient(daemon.app)

    with store_outage(daemon, db_url), caplog.at_level(logging.WARNING):
        during = client.post("/v1/events", content=_poison_body(now), headers=NDJSON)
        ready = client.get("/readyz")

    assert (503, 503) == (during.status_code, ready.status_code)
    assert during.json()["error"].startswith("store unavailable (OperationalError")
    assert during.json()["error"].endswith("; nothing of this body was stored, retry later")
    for leak in LEAKS:
        assert leak not in during.text
        assert leak not in caplog.text


def test_the_cli_reports_a_refused_file_on_one_line_and_ingests_the_others(
    db_url: str, tmp_path: Path, now: int
) -> None:
    bad, good = tmp_path / "bad.ndjson", tmp_path / "good.ndjson"
    bad.write_bytes(_poison_body(now))
    good.write_bytes(ndjson(scenario(now)))

    with refusing_thread(db_url, POISON):
        result = CliRunner().invoke(cli, ["ingest", "--db", db_url, str(bad), str(good)])

    code = "23514" if db_url.startswith("postgresql") else "SQLITE_CONSTRAINT_TRIGGER"
    assert 1 == result.exit_code
    assert f"{good}: 44 accepted, 6 skipped, 0 rejected\n" == result.stdout
    assert (
        f"sidewatch: error: {bad}: the store refused its data (IntegrityError {code}); "
        "nothing of it was stored\n"
    ) == result.stderr


def test_a_logged_database_error_shows_its_class_and_code_never_its_statement_or_values(
    db_url: str,
) -> None:
    engine = open_store(db_url)
    try:
        with engine.begin() as conn:
            # PostgreSQL's DETAIL line ("Failing row contains …") would carry the thread
            conn.execute(
                text(
                    "INSERT INTO run_fact (run_id, thread_id, mark, at, seq) "
                    "VALUES (:run, :thread, 'started', NULL, 0)"
                ),
                {"run": "r", "thread": POISON},
            )
    except SQLAlchemyError as e:
        try:
            raise RuntimeError("audit tick failed") from e
        except RuntimeError:
            failed = sys.exc_info()
    finally:
        engine.dispose()

    logged = JsonLogs().format(logging.LogRecord("t", logging.ERROR, "", 1, "", (), failed))

    code = "23502" if db_url.startswith("postgresql") else "SQLITE_CONSTRAINT_NOTNULL"
    assert f"IntegrityError {code}" in logged
    assert "RuntimeError: audit tick failed" in logged
    assert "Traceback (most recent call last)" in logged
    for leak in (*LEAKS, "run_fact", "not-null"):
        assert leak not in logged


# PostgreSQL only: SQLite looks a NUL up like any character.
@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_a_request_id_the_store_cannot_hold_names_no_wait(daemon: Daemon, db_url: str) -> None:
    r = TestClient(daemon.app).get("/v1/waits/thread%00x/int")

    assert 404 == r.status_code
    assert {"error": "no wait with requestId 'thread\\x00x/int'"} == r.json()
