"""A file ingested from disk: plain NDJSON is read a chunk of lines at a time and stored as
exactly the unit its bytes make; every other form is read whole, as before."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from sidewatch.app.ingest import Ingest
from sidewatch.config import Config
from sidewatch.ingest import reader
from sidewatch.ingest.digest import RefProtector
from sidewatch.store.db import open_store
from sidewatch.store.models import metadata
from sidewatch.store.repo import Store

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


@pytest.mark.parametrize(
    "body",
    [
        gzip.compress(SEED.read_bytes()),
        b"data: " + SEED.read_bytes().splitlines()[0] + b"\n\n",
        b"[" + b",".join(SEED.read_bytes().splitlines()) + b"]",
        b'{\n  "type": "RUN_STARTED",\n  "threadId": "t", "runId": "r"\n}\n',
        b"\n   \n",
    ],
    ids=["gzip", "sse", "json-array", "spread-object", "blank"],
)
def test_a_file_that_is_not_plain_ndjson_by_its_first_line_is_read_whole(
    body: bytes, tmp_path: Path
) -> None:
    path = tmp_path / "unit"
    path.write_bytes(body)

    assert reader.ndjson_file(str(path)) is None
    assert reader.ndjson_file("-") is None
