"""Optional OpenTelemetry traces: one span per wait, from its request to its close, with an
event per transition (at the time the evidence put the wait in the state).

On when the standard variables say so (`OTEL_TRACES_EXPORTER=otlp|console`, and not
`OTEL_SDK_DISABLED=true`); the resource comes from `OTEL_SERVICE_NAME` and
`OTEL_RESOURCE_ATTRIBUTES`. A span is written when its wait closes, so a wait open across a
restart still gets exactly one. Attributes are identities and codes only, never content; no
metrics are sent this way (Prometheus has them).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.trace import SpanKind, Tracer

from sidewatch import __version__
from sidewatch.core.model import Verdict, WaitEvidence
from sidewatch.errors import install_hint

log = logging.getLogger("sidewatch.otel")
NS_PER_MS = 1_000_000
MAX_MS = (2**64 - 1) // NS_PER_MS  # OTLP times are unsigned 64-bit nanoseconds (to 2554)


class WaitSpans:
    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer

    def on_closed(self, ev: WaitEvidence, v: Verdict) -> None:
        """Write the wait's span: requested → closed, one event per transition. A time no
        span can carry (a bad value already stored) raises ValueError before anything is
        written: such a span would fail its exporter's whole batch, the other waits' too."""
        times = (ev.requested_at, v.since, *(t.at for t in v.transitions))
        if not all(0 <= t <= MAX_MS for t in times):
            raise ValueError("a time of the wait is outside what a span can carry")
        attributes: dict[str, str | bool] = {
            "sidewatch.approval.request_id": ev.request_id,
            "sidewatch.approval.interrupt_id": ev.interrupt_id,
            "sidewatch.approval.run_id": ev.run_id,
            "sidewatch.approval.state": v.state.value,
            "sidewatch.approval.policy": v.policy,
            "sidewatch.approval.uncertain": v.uncertain,
            "gen_ai.conversation.id": ev.thread_id,
        }
        if v.facts.decision is not None:
            attributes["sidewatch.approval.decision"] = v.facts.decision.value
        if ev.reason:
            attributes["sidewatch.approval.reason"] = ev.reason
        if ev.action:
            attributes["gen_ai.tool.name"] = ev.action
        if ev.tool_call_id:
            attributes["gen_ai.tool.call.id"] = ev.tool_call_id
        if v.facts.action_digest:
            attributes["sidewatch.approval.action_digest"] = v.facts.action_digest
        span = self.tracer.start_span(
            f"approval {ev.action or ev.reason or 'wait'}",
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=ev.requested_at * NS_PER_MS,
        )
        for t in v.transitions:
            span.add_event(
                "sidewatch.approval.transition",
                attributes={
                    "sidewatch.approval.from": t.from_state.value if t.from_state else "none",
                    "sidewatch.approval.to": t.to_state.value,
                },
                timestamp=t.at * NS_PER_MS,
            )
        span.end(end_time=v.since * NS_PER_MS)


def from_environment(env: Mapping[str, str]) -> tuple[WaitSpans, TracerProvider] | None:
    """The spans hook, when the OTEL_* variables ask for traces; None otherwise."""
    if env.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return None
    kind = env.get("OTEL_TRACES_EXPORTER", "none").strip().lower()
    exporter: SpanExporter
    if kind == "console":
        exporter = ConsoleSpanExporter()
    elif kind == "otlp":
        try:  # optional: the otel extra
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
                OTLPSpanExporter,
            )
        except ImportError:
            log.error("OTEL_TRACES_EXPORTER=otlp needs: %s", install_hint("otel"))
            return None
        exporter = OTLPSpanExporter()
    else:
        return None
    attributes = {"service.version": __version__}
    if not env.get("OTEL_SERVICE_NAME"):
        attributes["service.name"] = "sidewatch"
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return WaitSpans(provider.get_tracer("sidewatch", __version__)), provider
