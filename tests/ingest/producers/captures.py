"""What real producers sent (`fixtures/`, see fixtures/README.md), ingested as one unit each:
the helpers the producers' tests share."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from sidewatch.app.audit import Audited, audit
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.core.assemble import assemble
from sidewatch.core.policy import DEFAULT_POLICY, Need
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store

CAPTURES = Path(__file__).resolve().parent / "fixtures"
Verdicts = list[tuple[str, str | None, bool]]  # (state, decision, uncertain) of each wait
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
    summary = Ingest(store, ref_protector(engine, Config()), Config()).body(
        "producer", body, received
    )
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
    Ingest(store, ref_protector(engine, Config()), Config()).body(name, capture(name), NOW - 60_000)
    found = audit(store, (QUIET,), NOW)
    engine.dispose()
    return found


def thread_findings(db_url: str, name: str) -> list[str]:
    """The rules of the findings of the capture `name`'s one thread, read from the store."""
    engine = open_store(db_url)
    store = Store(engine)
    Ingest(store, ref_protector(engine, Config()), Config()).body(name, capture(name), NOW - 60_000)
    (thread,) = store.threads()
    found = assemble(thread, lambda action, reason: QUIET).findings
    engine.dispose()
    return [f.rule for f in found]


def ingested_as_captured(db_url: str, body: bytes) -> list[tuple[str, str | None, bool]]:
    """(state, decision, uncertain) of every wait of one unit, in requested order. The unit
    arrives a second after the last time a producer stamped on it (NOW when it stamps none),
    and is audited a minute later."""
    stamps = [int(t) for t in re.findall(rb'"timestamp":(\d+)', body)]
    received = max([*stamps, NOW - 60_000]) + 1_000
    return verdicts_of(db_url, body, received, received + 60_000)


def audited_as_captured(db_url: str, body: bytes) -> list[Audited]:
    """Every wait of one unit, received and audited as `ingested_as_captured` does."""
    engine = open_store(db_url)
    store = Store(engine)
    stamps = [int(t) for t in re.findall(rb'"timestamp":(\d+)', body)]
    received = max([*stamps, NOW - 60_000]) + 1_000
    Ingest(store, ref_protector(engine, Config()), Config()).body("producer", body, received)
    waits = audit(store, (QUIET,), received + 60_000)
    engine.dispose()
    return waits


def findings_as_captured(db_url: str, name: str) -> list[tuple[str, ...]]:
    """The findings of every wait of the capture `name`, as `ingested_as_captured`."""
    return [a.verdict.findings for a in audited_as_captured(db_url, capture(name))]


def dropping(name: str, call: bytes, *, new_interrupt: bool = False) -> bytes:
    """A capture whose continuing run leaves out the TOOL_CALL_RESULT of `call` (and, with
    `new_interrupt`, ends with a new interrupt outcome instead of success)."""
    lines = capture(name).splitlines()
    kept = [
        line
        for line in lines
        if not (b'"TOOL_CALL_RESULT"' in line and b'"toolCallId":"' + call + b'"' in line)
    ]
    assert len(kept) == len(lines) - 1
    if new_interrupt:
        interrupt = (
            b'"outcome":{"type":"interrupt","interrupts":[{"id":"int-later","reason":"tool_call"}]}'
        )
        kept[-1] = kept[-1].replace(b'"outcome":{"type":"success"}', interrupt)
        assert b"int-later" in kept[-1]
    return b"\n".join(kept) + b"\n"
