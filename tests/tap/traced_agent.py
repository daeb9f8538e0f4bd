"""An agent process instrumented with OpenTelemetry, for the trace scenario: ag-ui-langgraph
over a graph with a scripted fake model that asks for approval of one tool call, behind the
one-line `TapMiddleware`, inside the OpenTelemetry ASGI instrumentation (its server span is
active when the tap sees the request), exporting its own spans over OTLP/HTTP to
`OTEL_EXPORTER_OTLP_ENDPOINT` as the agent's service would.

    python -m tests.tap.traced_agent PORT SIDEWATCH_URL
"""

from __future__ import annotations

import asyncio
import sys

import uvicorn
from ag_ui_langgraph import LangGraphAgent, add_langgraph_fastapi_endpoint
from fastapi import FastAPI
from langgraph.checkpoint.memory import InMemorySaver
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from sidewatch_tap import TapMiddleware
from tests.producers.capture_langgraph import build_graph, one_call_script

SERVICE = "demo-agent"


async def main(port: int, url: str) -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter()))
    app = FastAPI()
    agent = LangGraphAgent(
        name="demo", graph=build_graph(one_call_script(), checkpointer=InMemorySaver())
    )
    add_langgraph_fastapi_endpoint(app, agent, "/agent")
    app.add_middleware(TapMiddleware, url=url, heartbeat=False)  # the one line
    # added last, so outermost: the server span is active when the tap sees the request
    app.add_middleware(OpenTelemetryMiddleware, tracer_provider=provider)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    try:
        await uvicorn.Server(config).serve()
    finally:
        provider.shutdown()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
