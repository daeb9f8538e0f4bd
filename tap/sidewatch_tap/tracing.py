"""The W3C trace context of the request a run answers: what the tap adds to the run's input
(top-level `traceparent` and `tracestate`), so that sidewatch writes the wait's span into the
agent's own trace (docs/tracing.md).

Where the agent app is instrumented with OpenTelemetry, the active span when the tap sees the
request (the server span of the instrumentation around the tap) is the run's span: the one the
agent's trace shows. `opentelemetry-api` is imported if it is there, never required: without
it, or without an active span, the request's own `traceparent` header is used (its caller's
span, in the same trace). Identifiers only; a value past `MAX_CHARS` is not sent.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any

MAX_CHARS = 512  # a tracestate every vendor must propagate; the daemon checks the rest
TraceContext = dict[str, str]  # {"traceparent": ..., "tracestate": ...} (the latter optional)

_otel: Any = None  # opentelemetry.trace, once imported; False when it is not installed


def _trace_api() -> Any:
    global _otel  # noqa: PLW0603 - imported once per process, on first use
    if _otel is None:
        try:
            from opentelemetry import trace  # noqa: PLC0415 - optional, never a dependency

            _otel = trace
        except Exception:  # not installed (or broken): the header is used
            _otel = False
    return _otel


def active_span_context() -> TraceContext:
    """The active OpenTelemetry span's context, as W3C fields; empty when none is active (or
    opentelemetry-api is not installed)."""
    trace = _trace_api()
    if not trace:
        return {}
    with contextlib.suppress(Exception):
        ctx = trace.get_current_span().get_span_context()
        if ctx.is_valid:
            flags = int(ctx.trace_flags) & 0xFF
            out = {"traceparent": f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{flags:02x}"}
            state = ctx.trace_state.to_header() if ctx.trace_state else ""
            if state and len(state) <= MAX_CHARS:
                out["tracestate"] = state
            return out
    return {}


def header_context(headers: Iterable[tuple[bytes, bytes]]) -> TraceContext:
    """The request's `traceparent` and `tracestate` headers (several `tracestate` headers are
    one list, joined by commas); empty without a `traceparent`."""
    parent: str | None = None
    states: list[str] = []
    for name, value in headers:
        key = name.lower()
        if key == b"traceparent" and parent is None:
            parent = value.decode("latin-1").strip()
        elif key == b"tracestate":
            states.append(value.decode("latin-1").strip())
    if not parent or len(parent) > MAX_CHARS:
        return {}
    out = {"traceparent": parent}
    state = ",".join(s for s in states if s)
    if state and len(state) <= MAX_CHARS:
        out["tracestate"] = state
    return out


def request_context(scope: Any) -> TraceContext:
    """The trace context of an ASGI request: the active span's, else its headers'."""
    with contextlib.suppress(Exception):
        return active_span_context() or header_context(scope.get("headers") or ())
    return {}


def kept(value: dict[str, Any], out: dict[str, Any]) -> None:
    """Copy `value`'s own `traceparent` and `tracestate` (strings, bounded) into `out`."""
    for key in ("traceparent", "tracestate"):
        field = value.get(key)
        if isinstance(field, str) and len(field) <= MAX_CHARS:
            out[key] = field
