"""Which database errors are an outage (retry the same unit later) and which the store's
refusal of what was written (it would be refused again), by PostgreSQL's SQLSTATE or, without
one, by the DB-API's class; and how an error is told: class and code, never the statement or
its parameters. The errors are psycopg's and sqlite3's own classes, wrapped as SQLAlchemy
wraps them."""

from __future__ import annotations

import sqlite3

import psycopg
import pytest
from psycopg import errors as pg
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from sidewatch.store.db import failure, is_outage


def _wrapped(orig: Exception, base: type[Exception] = psycopg.Error) -> DBAPIError:
    return DBAPIError.instance(
        "INSERT INTO run_fact VALUES (%s)", ("secret-value",), orig, base, hide_parameters=True
    )


OUTAGES = [
    pg.ConnectionFailure,  # 08006
    pg.ReadOnlySqlTransaction,  # 25006: a standby after a failover
    pg.SerializationFailure,  # 40001
    pg.DeadlockDetected,  # 40P01: two units marking the same threads
    pg.DiskFull,  # 53100
    pg.LockNotAvailable,  # 55P03
    pg.QueryCanceled,  # 57014: statement or lock timeout
    pg.AdminShutdown,  # 57P01
    pg.InternalError_,  # XX000
    pg.InsufficientPrivilege,  # 42501: a grant missing on the store
    pg.UndefinedTable,  # 42P01: not the store sidewatch migrated
]
REFUSALS = [
    pg.StringDataRightTruncation,  # 22001: longer than its column
    pg.NumericValueOutOfRange,  # 22003
    pg.UntranslatableCharacter,  # 22P05
    pg.NotNullViolation,  # 23502
    pg.UniqueViolation,  # 23505: never a race (ON CONFLICT), so the data's
    pg.CheckViolation,  # 23514
    pg.ProgramLimitExceeded,  # 54000: psycopg's OperationalError, the data's all the same
    pg.SyntaxError,  # 42601
]


@pytest.mark.parametrize("cls", OUTAGES, ids=lambda c: c.__name__)
def test_an_error_that_says_the_store_cannot_work_now_is_an_outage(cls: type[Exception]) -> None:
    assert is_outage(_wrapped(cls("gone")))


@pytest.mark.parametrize("cls", REFUSALS, ids=lambda c: c.__name__)
def test_an_error_of_the_written_data_is_a_refusal(cls: type[Exception]) -> None:
    assert not is_outage(_wrapped(cls("refused")))


@pytest.mark.parametrize(
    ("error", "outage"),
    [
        (_wrapped(psycopg.OperationalError("connection refused")), True),
        (_wrapped(psycopg.InterfaceError("the connection is closed")), True),
        (_wrapped(psycopg.DataError("NUL")), False),
        (_wrapped(psycopg.ProgrammingError("cannot adapt type 'dict'")), False),
        (_wrapped(sqlite3.OperationalError("database is locked"), sqlite3.Error), True),
        (_wrapped(sqlite3.IntegrityError("NOT NULL constraint failed"), sqlite3.Error), False),
        (PoolTimeout("QueuePool limit reached"), True),
    ],
    ids=[
        "pg-operational",
        "pg-interface",
        "pg-data",
        "pg-programming",
        "sqlite-locked",
        "sqlite-integrity",
        "pool-timeout",
    ],
)
def test_without_a_sqlstate_the_dbapi_class_decides(error: SQLAlchemyError, outage: bool) -> None:
    assert outage == is_outage(error)


def test_an_invalidated_connection_is_an_outage_whatever_its_class() -> None:
    error = _wrapped(psycopg.DataError("x"))
    error.connection_invalidated = True

    assert is_outage(error)


def test_a_refusal_is_told_by_class_and_code_and_an_outage_with_its_first_line() -> None:
    refusal = _wrapped(pg.NotNullViolation('null value in column "at"\nDETAIL: (secret-value)'))
    outage = _wrapped(pg.DiskFull("could not extend file: No space left\nDETAIL: secret-value"))

    assert "IntegrityError 23502" == failure(refusal)
    assert "OperationalError 53100: could not extend file: No space left" == failure(outage)
    assert "OverflowError" == failure(OverflowError("Python int too large: 9223372036854775808"))
