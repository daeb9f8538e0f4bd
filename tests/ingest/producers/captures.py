"""What real producers sent (`fixtures/`, see fixtures/README.md), ingested as one unit each:
the helpers the producers' tests share."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from sidewatch.app.audit import Audited, audit
from sidewatch.app.ingest import ingest_unit, ref_protector
from sidewatch.config import Config
from sidewatch.core.policy import DEFAULT_POLICY, Need
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store

CAPTURES = Path(__file__).resolve().parent / "fixtures"
NOW = 1_785_083_400_000
# These integrations report no route, handle or heartbeat: a deployment marks them ignored.
QUIET = replace(
    DEFAULT_POLICY, name="quiet", route=Need.IGNORED, handle=Need.IGNORED, heartbeat=Need.IGNORED
)


def capture(name: str) -> bytes:
    """The captured stream `name` (a file of fixtures/, without `.ndjson`)."""
    return (CAPTURES / f"{name}.ndjson").read_bytes()


def verdicts(db_url: str, name: str) -> list[tuple[str, str | None, bool]]:
    """`verdicts_of` the capture `name`."""
    return verdicts_of(db_url, capture(name))


def verdicts_of(
    db_url: str, body: bytes, received: int = NOW - 60_000, at: int = NOW
) -> list[tuple[str, str | None, bool]]:
    """(state, decision, uncertain) of every wait of one unit received at `received` and
    audited at `at`, in requested order."""
    engine = open_store(db_url)
    store = Store(engine)
    summary = ingest_unit(store, "producer", body, received, ref_protector(engine, Config()))
    waits = audit(store, (QUIET,), at)
    engine.dispose()
    assert () == summary.rejects
    return [
        (
            a.verdict.state.value,
            a.verdict.facts.decision and a.verdict.facts.decision.value,
            a.verdict.uncertain,
        )
        for a in waits
    ]


def audited(db_url: str, name: str) -> list[Audited]:
    """Every wait of the capture `name`, audited a minute after it was received."""
    engine = open_store(db_url)
    store = Store(engine)
    ingest_unit(store, name, capture(name), NOW - 60_000, ref_protector(engine, Config()))
    found = audit(store, (QUIET,), NOW)
    engine.dispose()
    return found
