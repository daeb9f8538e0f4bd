"""Evidence naming a thread no interrupt announced: kept (sources are not ordered, so its
interrupt may still come, and then it applies), and recorded as the finding
`evidence_unknown_thread`, so a notifier or tap naming the wrong thread is seen."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from sidewatch.app.audit import audit
from sidewatch.app.ingest import Ingest
from sidewatch.config import Config
from sidewatch.core.policy import DEFAULT_POLICY
from sidewatch.ingest.digest import RefProtector
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store

SEED = Path(__file__).resolve().parents[2] / "sidewatch" / "cli" / "seed-audit.ndjson"
AT = 1_785_083_400_000  # the reference audit's moment
RULE = "evidence_unknown_thread"


@pytest.fixture
def ingest(db_url: str) -> Iterator[Ingest]:
    engine = open_store(db_url)
    yield Ingest(Store(engine), RefProtector(b"test-key", ()), Config(db_url=db_url))
    engine.dispose()


def lines(*events: dict) -> bytes:
    return b"".join(json.dumps(e).encode() + b"\n" for e in events)


def route(thread: str, interrupt: str, at: int = AT - 60_000) -> dict:
    value = {"threadId": thread, "interruptId": interrupt, "delivered": True}
    return {"type": "CUSTOM", "name": "sidewatch.route", "value": value, "timestamp": at}


def rules(ingest: Ingest) -> list[tuple[str, int]]:
    return sorted(ingest.store.findings())


def test_evidence_naming_a_thread_nobody_announced_is_a_finding(ingest: Ingest) -> None:
    summary = ingest.body("t", lines(route("thread-nobody", "int-x")), AT)

    assert (1, ()) == (summary.accepted, summary.rejects)
    assert [(RULE, AT - 60_000)] == rules(ingest)


def test_one_finding_per_wait_named_however_often_and_however_delivered(
    ingest: Ingest,
) -> None:
    body = lines(route("thread-nobody", "int-x"), route("thread-nobody", "int-x", AT - 1000))
    ingest.body("t", body, AT)
    ingest.body("t", body, AT)  # delivered again
    ingest.body("t", lines(route("thread-nobody", "int-y", AT - 500)), AT)

    assert [(RULE, AT - 60_000), (RULE, AT - 500)] == rules(ingest)


def test_evidence_for_an_announced_thread_or_by_request_id_or_a_heartbeat_is_none(
    ingest: Ingest,
) -> None:
    ingest.body("t", SEED.read_bytes(), AT)  # every thread of it announced
    before = rules(ingest)
    by_ref = {"requestId": "thread-elsewhere/int-1", "delivered": True}
    beat = {"threadId": "thread-not-paused-yet"}

    ingest.body(
        "t",
        lines(
            route("thread-export", "int-other"),  # a thread announced by an earlier unit
            {"type": "CUSTOM", "name": "sidewatch.route", "value": by_ref},
            {"type": "CUSTOM", "name": "sidewatch.heartbeat", "value": beat},
        ),
        AT,
    )

    assert [] == [r for r in rules(ingest) if r[0] == RULE]
    assert before == rules(ingest)


def test_evidence_in_the_unit_that_announces_its_thread_is_none(ingest: Ingest) -> None:
    ingest.body("t", SEED.read_bytes(), AT)  # its routes follow their interrupts in one unit

    assert [] == [r for r in rules(ingest) if r[0] == RULE]


def test_early_evidence_is_a_finding_and_still_applies_when_its_interrupt_comes(
    ingest: Ingest,
) -> None:
    seed = SEED.read_text().splitlines(keepends=True)
    (early,) = [line for line in seed if '"sidewatch.route"' in line and '"thread-export"' in line]
    ingest.body("notifier", early.encode(), AT)
    ingest.body("agent", "".join(line for line in seed if line != early).encode(), AT)

    states = {
        a.evidence.request_id: a.verdict.state for a in audit(ingest.store, (DEFAULT_POLICY,), AT)
    }

    assert [RULE] == [r for r, _ in rules(ingest) if r == RULE]
    # Without its route (kept, then applied) it would be UNROUTABLE by now.
    assert "WAITING" == states["thread-export/int-export"]
