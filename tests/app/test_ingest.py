"""A file ingested from disk: plain NDJSON (gzipped or not) is read a chunk of lines at a time
and committed a unit at a time, cut after a run's end, with the verdicts of one unit; every
other form is read whole, as before."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from sidewatch.app.audit import audit
from sidewatch.app.ingest import Ingest, framed_unit
from sidewatch.config import Config
from sidewatch.core.policy import DEFAULT_POLICY
from sidewatch.errors import StoreRefused, TooLarge
from sidewatch.ingest import reader
from sidewatch.ingest.digest import RefProtector
from sidewatch.store.db import open_store
from sidewatch.store.models import metadata
from sidewatch.store.repo import Store, UnitWriter

SEED = Path(__file__).resolve().parents[2] / "sidewatch" / "cli" / "seed-audit.ndjson"
AT = 1_785_083_400_000
PROTECT = RefProtector(b"test-key", ("role:", "policy:"))
# The seed scenario with what a file may also hold: blank and indented lines, CRLF, a bad
# line, an unknown type, and a line longer than a chunk.
LONG = b'{"type":"STATE_SNAPSHOT","snapshot":{"x":"' + b"y" * 300 + b'"}}'
BODY = (
    SEED.read_bytes().replace(b"\n", b"\n\n", 3)
    + b"  \n{not json\n"
    + b'{"type":"NOT_AG_UI"}\r\n'
    + LONG
    + b"\n   "
)


def rows(store: Store) -> dict[str, list[tuple[object, ...]]]:
    with store.engine.connect() as conn:
        return {
            t.name: sorted(map(tuple, conn.execute(select(t))), key=repr)
            for t in metadata.sorted_tables
            if t.name != "meta"
        }


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[tuple[Store, Store]]:
    engines = [open_store(f"sqlite:///{tmp_path / f'{n}.db'}") for n in ("whole", "chunks")]
    yield Store(engines[0]), Store(engines[1])
    for e in engines:
        e.dispose()


def test_a_file_read_in_chunks_is_stored_as_the_unit_its_bytes_make(
    tmp_path: Path, stores: tuple[Store, Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "traffic.ndjson"
    path.write_bytes(BODY)
    monkeypatch.setattr(reader, "STREAM_CHUNK", 64)  # many chunks, lines cut across them
    whole, chunked = stores
    chunks = reader.ndjson_file(str(path))
    assert chunks is not None
    lines = [line for chunk in chunks for line in chunk]

    by_bytes = Ingest(whole, PROTECT, Config()).body(str(path), path.read_bytes(), AT)
    by_chunks = Ingest(chunked, PROTECT, Config()).file(str(path), AT)

    assert BODY.split(b"\n") == lines
    assert by_bytes == by_chunks
    assert 2 == len(by_chunks.rejects)
    assert rows(whole) == rows(chunked)


LIMIT = 3


@pytest.mark.parametrize("final", [True, False], ids=["final-newline", "no-final-newline"])
@pytest.mark.parametrize("ending", [b"\n", b"\r\n"], ids=["lf", "crlf"])
def test_a_unit_of_exactly_the_line_limit_is_taken_and_one_line_more_is_refused_as_such(
    ending: bytes, final: bool
) -> None:
    """Issue 33: 3 lines against a limit of 3 were refused as 4 (the newline after the last
    line counted as starting one more)."""
    line = b'{"type":"STEP_STARTED","stepName":"plan"}'

    def body(n: int) -> bytes:
        return ending.join([line] * n) + (ending if final else b"")

    assert LIMIT == len(framed_unit(body(LIMIT), None, LIMIT).lines)
    with pytest.raises(TooLarge, match=f"^{LIMIT + 1} lines, over the limit of {LIMIT} a unit"):
        framed_unit(body(LIMIT + 1), None, LIMIT)
    with pytest.raises(TooLarge, match=f"^{LIMIT + 1} lines"):  # as a declared NDJSON body too
        framed_unit(body(LIMIT + 1), "application/x-ndjson", LIMIT)
    # a gzipped body and one sent as application/json are counted alike
    assert LIMIT == len(framed_unit(gzip.compress(body(LIMIT)), None, LIMIT).lines)
    assert LIMIT == len(framed_unit(body(LIMIT), "application/json", LIMIT).items)


@pytest.mark.parametrize("ending", [b"\n", b"\r\n"], ids=["lf", "crlf"])
def test_a_file_read_in_chunks_has_the_lines_of_its_body_a_final_newline_starting_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ending: bytes
) -> None:
    body = ending.join(SEED.read_bytes().splitlines()) + ending
    path = tmp_path / "traffic.ndjson"
    path.write_bytes(body)
    monkeypatch.setattr(reader, "STREAM_CHUNK", 64)
    chunks = reader.ndjson_file(str(path))
    assert chunks is not None

    lines = [line for chunk in chunks for line in chunk]

    assert reader.frame(body).lines == lines
    assert body.count(b"\n") == len(lines)


@pytest.mark.parametrize(
    "body",
    [
        gzip.compress(gzip.compress(SEED.read_bytes())),
        b"data: " + SEED.read_bytes().splitlines()[0] + b"\n\n",
        b"[" + b",".join(SEED.read_bytes().splitlines()) + b"]",
        b'{\n  "type": "RUN_STARTED",\n  "threadId": "t", "runId": "r"\n}\n',
        b"\n   \n",
    ],
    ids=["gzip-in-gzip", "sse", "json-array", "spread-object", "blank"],
)
def test_a_file_that_is_not_plain_ndjson_by_its_first_line_is_read_whole(
    body: bytes, tmp_path: Path
) -> None:
    path = tmp_path / "unit"
    path.write_bytes(body)

    assert reader.ndjson_file(str(path)) is None
    assert reader.ndjson_file("-") is None


# Traffic of many threads and producers, each capture on threads of its own.
CAPTURES = sorted(
    (Path(__file__).resolve().parents[1] / "ingest/producers/fixtures").glob("*.ndjson")
)
LATER = AT + 3_600_000


def traffic() -> bytes:
    parts = [SEED.read_bytes().rstrip(b"\n")]
    for n, capture in enumerate(CAPTURES):
        text = capture.read_bytes().rstrip(b"\n")
        parts.append(text.replace(b'"threadId":"', f'"threadId":"c{n}-'.encode()))
    return b"\n".join(parts) + b"\n"


def outcome(store: Store) -> tuple[object, ...]:
    """What the store makes of its traffic: each wait's verdict and its findings."""
    verdicts = sorted(repr(a.verdict) for a in audit(store, (DEFAULT_POLICY,), LATER))
    return tuple(verdicts), tuple(sorted(store.findings()))


def facts(store: Store) -> dict[str, list[tuple[object, ...]]]:
    """The store's facts, without the columns that tell which unit stored them."""
    kept = {}
    with store.engine.connect() as conn:
        for t in metadata.sorted_tables:
            if t.name in FACT_TABLES:
                cols = [c for c in t.c if c.name not in ("id", "seq", "last_seq", "unit_id")]
                kept[t.name] = sorted(map(tuple, conn.execute(select(*cols))), key=repr)
    return kept


FACT_TABLES = (
    "answer",
    "finding",
    "heartbeat",
    "interrupt",
    "legacy_resume",
    "run_fact",
    "run_trace",
    "signal",
    "subagent",
    "tool_call",
    "tool_result",
)


@pytest.fixture
def twin(
    db_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[tuple[Store, Store]]:
    """Two new stores on the database of `db_url` (SQLite and PostgreSQL)."""
    if db_url.startswith("sqlite"):
        urls = [f"sqlite:///{tmp_path / f'{n}.db'}" for n in ("a", "b")]
    else:
        schemas = request.getfixturevalue("pg_schemas")
        urls = [str(schemas.url(schemas.blank())) for _ in range(2)]
    engines = [open_store(u) for u in urls]
    yield Store(engines[0]), Store(engines[1])
    for e in engines:
        e.dispose()


def test_a_file_over_the_unit_limit_is_stored_in_units_with_the_verdicts_of_one(
    tmp_path: Path, twin: tuple[Store, Store]
) -> None:
    path = tmp_path / "day.ndjson.gz"
    path.write_bytes(gzip.compress(traffic()))
    whole, chunked = twin
    units: list[int] = []

    one = Ingest(whole, PROTECT, Config(max_lines_per_unit=1_000_000)).file(str(path), AT)
    many = Ingest(chunked, PROTECT, Config(max_lines_per_unit=25)).file(
        str(path), AT, lambda lines, _read: units.append(lines)
    )

    assert len(units) > 10
    assert (one.accepted, one.skipped, one.rejects) == (many.accepted, many.skipped, many.rejects)
    assert outcome(whole) == outcome(chunked)


def test_a_file_stopped_part_way_is_completed_by_ingesting_it_again(
    tmp_path: Path, twin: tuple[Store, Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "day.ndjson"
    path.write_bytes(traffic())
    clean, resumed = twin
    config = Config(max_lines_per_unit=25)
    Ingest(clean, PROTECT, config).file(str(path), AT)
    write, calls = UnitWriter.write, []

    def refused_at_the_fifth(self: UnitWriter, *args: Any) -> bool:
        calls.append(1)
        if len(calls) == 5:
            raise StoreRefused("the store refused the unit's data", "DataError")
        return write(self, *args)

    monkeypatch.setattr(UnitWriter, "write", refused_at_the_fifth)
    with pytest.raises(StoreRefused):
        Ingest(resumed, PROTECT, config).file(str(path), AT)
    stopped = facts(resumed)
    monkeypatch.setattr(UnitWriter, "write", write)

    again = Ingest(resumed, PROTECT, config).file(str(path), AT)

    assert stopped != facts(clean)
    assert not again.redelivered
    assert facts(clean) == facts(resumed)
    assert outcome(clean) == outcome(resumed)
