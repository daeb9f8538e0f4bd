"""Facts to rows and back, on SQLite and PostgreSQL: every field of every fact comes back as
it went in, each by its name (a field added or moved cannot shift another's column)."""

from __future__ import annotations

from dataclasses import fields

import pytest

from sidewatch.core.facts import (
    AnswerFact,
    Fact,
    FindingFact,
    HeartbeatFact,
    InterruptFact,
    LegacyResumeFact,
    RunFact,
    RunMark,
    SignalFact,
    SignalKind,
    ToolCallFact,
    ToolResultFact,
)
from sidewatch.core.model import Code
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store

AT = 1_785_083_400_000
T = "t/1@x y"

# One fact of each kind, every field set and unlike its neighbours (no default, no two
# values alike), so that a value read into another field is seen.
FACTS: list[Fact] = [
    InterruptFact(
        thread_id=T,
        run_id="r-1",
        interrupt_id="i-1",
        at=AT,
        seq=1,
        reason="tool_call",
        tool_call_id="c-1",
        expires_at=AT + 9,
        digest="sha256:i",
        handle=True,
        request_id="req-1",
        action="deploy",
        tool_result_receipt=True,
    ),
    ToolCallFact(
        thread_id=T,
        tool_call_id="c-1",
        run_id="r-1",
        name="deploy",
        digest="sha256:c",
        at=AT - 1,
        seq=2,
    ),
    RunFact(run_id="r-2", thread_id=T, mark=RunMark.STARTED, at=AT + 1, seq=3),
    AnswerFact(
        thread_id=T,
        run_id="r-2",
        interrupt_id="i-1",
        code=Code.ACCEPT,
        at=AT + 2,
        seq=4,
        digest="sha256:a",
        via="tool_message",
    ),
    ToolResultFact(thread_id=T, run_id="r-2", tool_call_id="c-1", at=AT + 3, seq=5),
    LegacyResumeFact(
        thread_id=T,
        run_id="r-3",
        code=Code.DECLINE,
        at=AT + 4,
        seq=6,
        digest="sha256:l",
        entries=(("k", Code.ACCEPT, None),),
    ),
    SignalFact(
        kind=SignalKind.ROUTE,
        at=AT + 5,
        seq=7,
        request_id=None,
        thread_id=T,
        interrupt_id="i-1",
        approver_ref="role:ops",
        channel="slack",
        delivered=True,
        acknowledged=True,
        code=Code.CANCEL,
        digest="sha256:s",
        key="k-signal",
    ),
    # A beat comes back as a span of one beat (store.heartbeats), without an ingest key.
    HeartbeatFact(
        thread_id=T, at=AT + 6, seq=8, run_id="r-1", handle=False, last_at=AT + 6, last_seq=8
    ),
    FindingFact(
        rule="expires_at_unparsable",
        at=AT + 7,
        seq=9,
        thread_id=T,
        run_id="r-1",
        interrupt_id="i-1",
    ),
]


def test_every_fact_comes_back_field_by_field(db_url: str) -> None:
    engine = open_store(db_url)
    store = Store(engine)
    with store.unit("test", AT) as writer:
        assert writer is not None
        writer.write(FACTS, [], {}, len(FACTS), 0)

    (thread,) = store.threads([T])
    engine.dispose()

    stored = [
        *thread.interrupts,
        *thread.tool_calls,
        *thread.runs,
        *thread.answers,
        *thread.tool_results,
        *thread.legacy_resumes,
        *thread.signals,
        *thread.heartbeats,
        *thread.findings,
    ]
    assert FACTS == stored


@pytest.mark.parametrize("fact", FACTS, ids=lambda f: type(f).__name__)
def test_facts_are_built_by_name_only(fact: Fact) -> None:
    with pytest.raises(TypeError):
        type(fact)(*(getattr(fact, f.name) for f in fields(fact)))
