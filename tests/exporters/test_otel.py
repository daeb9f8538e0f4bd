"""OpenTelemetry: one span per wait from request to close, an event per transition, checked
with the SDK's in-memory exporter."""

from __future__ import annotations

import json
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sidewatch.app.audit import Auditor
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.exporters.otel import WaitSpans, from_environment
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store

SEED = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "seed-audit.ndjson"
AT = 1_785_083_400_000  # 2026-07-26T16:30:00Z
MS = 1_000_000


def test_a_closed_wait_is_one_span_from_request_to_close_with_its_transitions(
    db_url: str,
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    engine = open_store(db_url)
    store = Store(engine)
    ingest = Ingest(store, ref_protector(engine, Config()), Config())
    ingest.body("seed", SEED.read_bytes(), AT)
    auditor = Auditor(
        store, Config().policies, on_closed=WaitSpans(provider.get_tracer("t")).on_closed
    )

    auditor.tick(AT)
    declined = exporter.get_finished_spans()
    receipt = {
        "type": "CUSTOM",
        "name": "sidewatch.receipt",
        "timestamp": AT + 60_000,
        "value": {"threadId": "thread-deploy", "interruptId": "int-deploy"},
    }
    ingest.body("receipt", json.dumps(receipt).encode(), AT + 60_000)
    auditor.tick(AT + 120_000)
    auditor.tick(AT + 180_000)
    engine.dispose()

    (span,) = declined
    assert "approval send_message" == span.name
    assert {
        "sidewatch.approval.request_id": "thread-message/int-message",
        "sidewatch.approval.interrupt_id": "int-message",
        "sidewatch.approval.run_id": "run-message-1",
        "sidewatch.approval.state": "CLOSED_BY_DECLINE",
        "sidewatch.approval.decision": "decline",
        "sidewatch.approval.policy": "default",
        "sidewatch.approval.uncertain": False,
        "sidewatch.approval.reason": "tool_call",
        "gen_ai.conversation.id": "thread-message",
        "gen_ai.tool.name": "send_message",
        "gen_ai.tool.call.id": "call-int-message",
    } == {
        k: v
        for k, v in dict(span.attributes or {}).items()
        if k != "sidewatch.approval.action_digest"
    }
    assert (1_785_081_000_000 * MS, 1_785_081_600_000 * MS) == (span.start_time, span.end_time)
    assert [("none", "WAITING"), ("WAITING", "CLOSED_BY_DECLINE")] == [
        (e.attributes["sidewatch.approval.from"], e.attributes["sidewatch.approval.to"])
        for e in span.events
    ]
    spans = exporter.get_finished_spans()
    assert ["approval send_message", "approval deploy_service"] == [s.name for s in spans]
    assert "RESUMED" == dict(spans[1].attributes or {})["sidewatch.approval.state"]


def test_no_content_reaches_a_span(db_url: str) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    engine = open_store(db_url)
    store = Store(engine)
    Ingest(store, ref_protector(engine, Config()), Config()).body("seed", SEED.read_bytes(), AT)

    Auditor(store, Config().policies, on_closed=WaitSpans(provider.get_tracer("t")).on_closed).tick(
        AT
    )
    engine.dispose()

    text = json.dumps([s.to_json() for s in exporter.get_finished_spans()])
    for content in ("#customers", "price-change", "Approve int-message?", "I will need approval"):
        assert content not in text


def test_traces_are_on_only_when_the_otel_variables_ask() -> None:
    assert from_environment({}) is None
    assert from_environment({"OTEL_TRACES_EXPORTER": "none"}) is None
    assert (
        from_environment({"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"}) is None
    )
    on = from_environment({"OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "sw-test"})
    assert on is not None
    on[1].shutdown()
