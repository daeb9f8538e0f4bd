"""A real OTLP trace receiver for the tests: it decodes the official `opentelemetry-proto`
messages (`ExportTraceServiceRequest`) sent over HTTP (`POST /v1/traces`, protobuf, gzip or
not) and over gRPC (`opentelemetry.proto.collector.trace.v1.TraceService/Export`), as a
collector would, and keeps every span it was sent. No collector is installable here; this
is the wire format a collector reads, decoded by the same generated classes."""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    return None if kind is None else getattr(v, kind)


def _attributes(items: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in items if isinstance(kv, KeyValue)}


@dataclass(frozen=True)
class Received:
    """One span as a collector decoded it (ids in lowercase hex, as the W3C header writes)."""

    protocol: str
    service: str
    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_span_id: str  # "" for a root span
    attributes: dict[str, Any]
    links: tuple[tuple[str, str, dict[str, Any]], ...]  # (trace id, span id, attributes)
    start_ns: int
    end_ns: int


@dataclass
class Receiver:
    spans: list[Received] = field(default_factory=list)
    requests: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, protocol: str, raw: bytes) -> bytes:
        request = trace_service_pb2.ExportTraceServiceRequest()
        request.ParseFromString(raw)
        self._keep(protocol, request)
        return trace_service_pb2.ExportTraceServiceResponse().SerializeToString()

    def _keep(self, protocol: str, request: Any) -> None:
        got = []
        for rs in request.resource_spans:
            service = str(_attributes(rs.resource.attributes).get("service.name", ""))
            for ss in rs.scope_spans:
                for s in ss.spans:
                    got.append(
                        Received(
                            protocol=protocol,
                            service=service,
                            name=s.name,
                            kind=PbSpan.SpanKind.Name(s.kind),
                            trace_id=s.trace_id.hex(),
                            span_id=s.span_id.hex(),
                            parent_span_id=s.parent_span_id.hex(),
                            attributes=_attributes(s.attributes),
                            links=tuple(
                                (ln.trace_id.hex(), ln.span_id.hex(), _attributes(ln.attributes))
                                for ln in s.links
                            ),
                            start_ns=s.start_time_unix_nano,
                            end_ns=s.end_time_unix_nano,
                        )
                    )
        with self._lock:
            self.requests += 1
            self.spans.extend(got)

    def wait_for(self, predicate: Any, timeout: float = 20.0) -> list[Received]:
        """The spans received, once `predicate(spans)` holds (AssertionError after `timeout`)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                spans = list(self.spans)
            if predicate(spans):
                return spans
            if time.monotonic() > deadline:
                raise AssertionError(f"the receiver did not get the spans expected: {spans}")
            time.sleep(0.05)


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Encoding") == "gzip":
                raw = gzip.decompress(raw)
            if self.path != "/v1/traces" or not self.headers.get("Content-Type", "").startswith(
                "application/x-protobuf"
            ):
                self.send_response(404)
                self.end_headers()
                return
            body = receiver.take("http/protobuf", raw)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    return Handler


class _Service(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, receiver: Receiver) -> None:
        self.receiver = receiver

    def Export(self, request: Any, context: Any) -> Any:
        self.receiver._keep("grpc", request)
        return trace_service_pb2.ExportTraceServiceResponse()


@contextmanager
def http_receiver() -> Iterator[tuple[Receiver, str]]:
    """A receiver on OTLP/HTTP, and its endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT`)."""
    receiver = Receiver()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def grpc_receiver() -> Iterator[tuple[Receiver, str]]:
    """A receiver on OTLP/gRPC (plaintext), and its endpoint."""
    receiver = Receiver()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_Service(receiver), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield receiver, f"http://127.0.0.1:{port}"
    finally:
        server.stop(grace=None)


RECEIVERS = {"http/protobuf": http_receiver, "grpc": grpc_receiver}
