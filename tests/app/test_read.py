"""The read use case answers at the `now` it is given: the same store read at two times gives
each time's verdicts, and says which time it evaluated."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from sidewatch.app.audit import Auditor
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.app.read import Read
from sidewatch.config import Config
from sidewatch.core.model import State
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
FIXTURE = SHARED / "fixtures" / "seed-audit.ndjson"
EXPECTED = json.loads((SHARED / "fixtures" / "seed-audit.expected.json").read_text())
AT = 1_785_083_400_000  # 2026-07-26T16:30:00Z, the fixture's evaluation time
MIN = 60_000


@pytest.fixture
def read(db_url: str) -> Iterator[Read]:
    engine = open_store(db_url)
    store = Store(engine)
    Ingest(store, ref_protector(engine, Config()), Config()).body(
        "seed", FIXTURE.read_bytes(), AT - 60 * MIN
    )
    yield Read(store, Auditor(store, Config().policies).policy_for)
    engine.dispose()


def test_the_waits_are_classified_at_the_now_given(read: Read) -> None:
    answer = read.waits({s.value for s in State}, 100, AT)

    assert "2026-07-26T16:30:00Z" == answer["evaluatedAt"]
    assert EXPECTED["expected"] == {w["requestId"]: w["state"] for w in answer["waits"]}


def test_one_wait_is_classified_at_the_now_given(read: Read) -> None:
    at_ten, at_half_past = (read.wait("thread-deploy/int-deploy", t) for t in (AT - 20 * MIN, AT))

    assert at_ten is not None and at_half_past is not None
    assert ("2026-07-26T16:10:00Z", "2026-07-26T16:30:00Z") == (
        at_ten["evaluatedAt"],
        at_half_past["evaluatedAt"],
    )
    assert "STUCK_AFTER_DECISION" == at_half_past["state"]
    assert at_ten["state"] != at_half_past["state"]
