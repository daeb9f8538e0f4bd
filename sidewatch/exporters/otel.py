"""Optional OpenTelemetry traces: one span per wait, from its request to its close, with an
event per transition (at the time the evidence put the wait in the state).

On when the standard variables say so (`OTEL_TRACES_EXPORTER=otlp|console`, and not
`OTEL_SDK_DISABLED=true`); the resource comes from `OTEL_SERVICE_NAME` and
`OTEL_RESOURCE_ATTRIBUTES`. A span is written when its wait closes, so a wait open across a
restart still gets exactly one; a wait that reopens (a late answer) and closes again gets one
more. Attributes are identities and codes only, never content; no metrics are sent this way
(Prometheus has them).

Joined to the agent's trace (docs/tracing.md): when the asking run's request carried a W3C
trace context (`traceparent` on its input or `RUN_STARTED`, kept per run), the wait's span is
a child of that run's span (same trace id), and links the span of every later run that
answered it, continued it or moved past it; a wait whose asking run had none keeps a root
span of its own. The sampler is the SDK's (`OTEL_TRACES_SAMPLER`, default parent-based: a
wait in a trace the agent did not sample is not sampled either). The OTLP exporter speaks
`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, else `OTEL_EXPORTER_OTLP_PROTOCOL`: `http/protobuf`
(the default) or `grpc`, each from the `[otel]` extra.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    TraceFlags,
    Tracer,
    TraceState,
    set_span_in_context,
)

from sidewatch import __version__
from sidewatch.core.model import Decision, RunEvent, Verdict, WaitEvidence
from sidewatch.errors import install_hint

log = logging.getLogger("sidewatch.otel")
NS_PER_MS = 1_000_000
MAX_MS = (2**64 - 1) // NS_PER_MS  # OTLP times are unsigned 64-bit nanoseconds (to 2554)
PROTOCOLS = ("http/protobuf", "grpc")
ANSWERED = "answered"  # a link's `sidewatch.approval.link`: the run's input answered the wait
LATER_RUN = "later_run"  # a later run of the thread that continued it or moved past it

RunTrace = tuple[str, str | None]  # (traceparent, tracestate), as ingest kept them
RunKey = tuple[str, str]  # (thread, run)
# The trace contexts of runs, by (thread, run) (store.traces.run_traces, bound to a store)
TraceLookup = Callable[[Collection[RunKey]], Mapping[RunKey, RunTrace]]
Closing = Sequence[tuple[WaitEvidence, Verdict]]  # the waits a tick closed, with their verdicts


def span_context(trace: RunTrace) -> SpanContext | None:
    """The remote span a kept `traceparent` (and `tracestate`) names; None if it names none."""
    parent, state = trace
    try:
        trace_id, span_id, flags = int(parent[3:35], 16), int(parent[36:52], 16), parent[53:55]
        context = SpanContext(
            trace_id=trace_id,
            span_id=span_id,
            is_remote=True,
            trace_flags=TraceFlags(int(flags, 16) & TraceFlags.SAMPLED),
            trace_state=TraceState.from_header([state]) if state else TraceState(),
        )
    except ValueError:
        return None
    return context if context.is_valid else None


def linked_runs(ev: WaitEvidence) -> dict[str, str]:
    """The later runs of the wait, in the order the evidence met them: each that answered it
    (`answered`), and each that continued it or moved past it (`later_run`)."""
    runs: dict[str, str] = {}
    for item in ev.items:
        if isinstance(item, Decision) and item.run_id is not None:
            runs[item.run_id] = ANSWERED
        elif isinstance(item, RunEvent):
            runs.setdefault(item.run_id, LATER_RUN)
    runs.pop(ev.run_id, None)
    return runs


class WaitSpans:
    def __init__(self, tracer: Tracer, traces: TraceLookup | None = None) -> None:
        self.tracer = tracer
        self.traces = traces  # None: every wait's span is a root (no store to ask)

    def _found(
        self, closing: Closing, linked: Sequence[Mapping[str, str]]
    ) -> Mapping[RunKey, RunTrace]:
        """The trace contexts of every run the closing waits name (the asking runs and the
        `linked` ones), in one read for the tick; a failed read writes their spans as roots,
        with a warning."""
        if self.traces is None:
            return {}
        runs = {
            (ev.thread_id, run)
            for (ev, _), later in zip(closing, linked, strict=True)
            for run in (ev.run_id, *later)
        }
        try:
            return self.traces(runs)
        except Exception:
            log.warning("trace contexts of %d closing waits not read: root spans", len(closing))
            return {}

    @staticmethod
    def _joined(
        ev: WaitEvidence, linked: Mapping[str, str], found: Mapping[RunKey, RunTrace]
    ) -> tuple[Context | None, list[Link]]:
        """The wait's parent context (its asking run's span) and its links to the `linked`
        runs, as far as the runs carried a trace context."""
        asking = found.get((ev.thread_id, ev.run_id))
        parent = span_context(asking) if asking else None
        links = []
        for run, role in linked.items():
            trace = found.get((ev.thread_id, run))
            context = span_context(trace) if trace else None
            if context is not None:
                attributes = {"sidewatch.approval.run_id": run, "sidewatch.approval.link": role}
                links.append(Link(context, attributes))
        return (set_span_in_context(NonRecordingSpan(parent)) if parent else None), links

    def on_closed(self, closing: Closing) -> int:
        """Write the span of each wait the tick closed; the number whose span failed (each
        logged; the others are written all the same)."""
        # The runs to link are looked for only when there is a store to ask for their contexts.
        linked: list[Mapping[str, str]] = [{} for _ in closing]
        found: Mapping[RunKey, RunTrace] = {}
        if self.traces is not None and closing:
            linked = [linked_runs(ev) for ev, _ in closing]
            found = self._found(closing, linked)
        failed = 0
        for (ev, v), later in zip(closing, linked, strict=True):
            try:
                self._span(ev, v, self._joined(ev, later, found))
            except Exception:  # an exporter never stops the audit, nor the other spans
                log.exception("closing hook failed for %s", ev.request_id)
                failed += 1
        return failed

    def _span(
        self, ev: WaitEvidence, v: Verdict, joined: tuple[Context | None, list[Link]]
    ) -> None:
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
        parent, links = joined
        span = self.tracer.start_span(
            f"approval {ev.action or ev.reason or 'wait'}",
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            links=links,
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


def protocol_of(env: Mapping[str, str]) -> str:
    """The OTLP protocol the variables ask for: the traces' own, else the general one, else
    `http/protobuf` (the OpenTelemetry default)."""
    for name in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        value = env.get(name, "").strip().lower()
        if value:
            return value
    return "http/protobuf"


def otlp_exporter(protocol: str) -> SpanExporter | None:
    """The OTLP span exporter of `protocol` (from the `[otel]` extra); None, logged, when the
    protocol is not one sidewatch speaks or its exporter is not installed."""
    if protocol not in PROTOCOLS:
        log.error(
            "OTLP protocol %r is not supported (grpc or http/protobuf): no traces", protocol[:32]
        )
        return None
    try:  # optional: pip install 'sidewatch[otel]'
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # noqa: PLC0415
                OTLPSpanExporter as Grpc,
            )

            return Grpc()
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
            OTLPSpanExporter as Http,
        )

        return Http()
    except ImportError:
        log.error("OTLP over %s needs: %s", protocol, install_hint("otel"))
        return None


def from_environment(
    env: Mapping[str, str], traces: TraceLookup | None = None
) -> tuple[WaitSpans, TracerProvider] | None:
    """The spans hook, when the OTEL_* variables ask for traces; None otherwise. `traces`
    reads the runs' trace contexts (the daemon binds it to its store)."""
    if env.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return None
    kind = env.get("OTEL_TRACES_EXPORTER", "none").strip().lower()
    exporter: SpanExporter | None
    if kind == "console":
        exporter = ConsoleSpanExporter()
    elif kind == "otlp":
        exporter = otlp_exporter(protocol_of(env))
        if exporter is None:
            return None
    else:
        return None
    attributes = {"service.version": __version__}
    if not env.get("OTEL_SERVICE_NAME"):
        attributes["service.name"] = "sidewatch"
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return WaitSpans(provider.get_tracer("sidewatch", __version__), traces), provider
