"""The wait's span in the agent's own trace (issue 32), as a real OTLP receiver decodes it over
HTTP and gRPC: a child of its asking run's span, linking the runs that answered or moved past
it; a wait whose asking run carried no trace context keeps its root span; a malformed context
is a finding, never a reject."""

from __future__ import annotations

import os
from collections.abc import Iterator
from functools import partial
from typing import Any

import orjson
import pytest
from sqlalchemy import text

from sidewatch.app.audit import Auditor
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.exporters.otel import from_environment, protocol_of
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store
from sidewatch.store.sql import driver_sql
from sidewatch.store.traces import run_traces, select_sql
from tests.exporters.otlp_receiver import RECEIVERS, Receiver

T0 = 1_785_081_000_000
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
ASK = "00f067aa0ba902b7"
ANSWER = "b9c7c989f97918e1"
ASKING = f"00-{TRACE}-{ASK}-01"
ANSWERING = f"00-0af7651916cd43dd8448eb211c80319c-{ANSWER}-01"


def run_input(run: str, thread: str = "t1", **extra: Any) -> dict[str, Any]:
    return {"threadId": thread, "runId": run, "messages": [], "timestamp": T0, **extra}


def asked(thread: str = "t1", at: int = T0, **trace: Any) -> list[dict[str, Any]]:
    outcome = {
        "type": "interrupt",
        "interrupts": [{"id": "i1", "reason": "tool_call", "toolCallId": "c1"}],
    }
    return [
        run_input("r1", thread, **trace),
        {"type": "RUN_STARTED", "threadId": thread, "runId": "r1", "timestamp": at},
        {
            "type": "RUN_FINISHED",
            "threadId": thread,
            "runId": "r1",
            "timestamp": at + 1_000,
            "outcome": outcome,
        },
    ]


def declined(thread: str = "t1", at: int = T0 + 60_000, **trace: Any) -> list[dict[str, Any]]:
    """Run r2's input declines i1 (the wait closes), and r2 runs to its end."""
    answer = {"interruptId": "i1", "status": "resolved", "payload": {"approved": False}}
    return [
        {**run_input("r2", thread, **trace), "timestamp": at, "resume": [answer]},
        {"type": "RUN_STARTED", "threadId": thread, "runId": "r2", "timestamp": at + 10},
        {"type": "RUN_FINISHED", "threadId": thread, "runId": "r2", "timestamp": at + 2_000},
    ]


def moved_past(thread: str = "t1", at: int = T0 + 60_000, **trace: Any) -> list[dict[str, Any]]:
    """Run r2 starts without an answer for i1 and finishes: it moved past the wait."""
    return [
        {**run_input("r2", thread, **trace), "timestamp": at},
        {"type": "RUN_STARTED", "threadId": thread, "runId": "r2", "timestamp": at + 10},
        {"type": "RUN_FINISHED", "threadId": thread, "runId": "r2", "timestamp": at + 2_000},
    ]


@pytest.fixture(params=sorted(RECEIVERS))
def receiver(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, Receiver]]:
    """A real OTLP receiver of each protocol, and the variables that point sidewatch at it."""
    protocol = str(request.param)
    with RECEIVERS[protocol]() as (got, endpoint):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        monkeypatch.setenv("OTEL_SERVICE_NAME", "sidewatch-test")
        yield protocol, got


class Daemon:
    """The store, ingest and the auditor, with the spans hook made from the variables as
    `sidewatch serve` makes it."""

    def __init__(self, db_url: str, protocol: str) -> None:
        self.engine = open_store(db_url)
        self.store = Store(self.engine)
        env = {
            **os.environ,
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": protocol,
        }
        hook = from_environment(env, partial(run_traces, self.engine))
        assert hook is not None
        self.spans, self.provider = hook
        self.ingest = Ingest(self.store, ref_protector(self.engine, Config()), Config())
        self.auditor = Auditor(self.store, Config().policies, on_closed=self.spans.on_closed)

    def feed(self, lines: list[dict[str, Any]], at: int) -> None:
        self.ingest.body("test", b"\n".join(orjson.dumps(line) for line in lines), at)

    def close(self) -> None:
        self.provider.force_flush()
        self.provider.shutdown()
        self.engine.dispose()


def test_the_wait_is_a_child_of_its_asking_run_and_links_the_run_that_answered_it(
    db_url: str, receiver: tuple[str, Receiver]
) -> None:
    protocol, got = receiver
    daemon = Daemon(db_url, protocol)
    daemon.feed(asked(traceparent=ASKING, tracestate="vendor=opaque1"), T0 + 2_000)
    daemon.auditor.tick(T0 + 30_000)
    daemon.feed(declined(traceparent=ANSWERING), T0 + 63_000)
    daemon.auditor.tick(T0 + 90_000)
    daemon.close()

    (span,) = got.wait_for(lambda spans: len(spans) >= 1)
    assert (protocol, "sidewatch-test", "approval tool_call") == (
        span.protocol,
        span.service,
        span.name,
    )
    assert (TRACE, ASK) == (span.trace_id, span.parent_span_id)
    assert [
        (
            "0af7651916cd43dd8448eb211c80319c",
            ANSWER,
            {"sidewatch.approval.run_id": "r2", "sidewatch.approval.link": "answered"},
        )
    ] == list(span.links)
    assert "CLOSED_BY_DECLINE" == span.attributes["sidewatch.approval.state"]
    assert ("SPAN_KIND_INTERNAL", T0 + 1_000, T0 + 60_000) == (
        span.kind,
        span.start_ns // 1_000_000,
        span.end_ns // 1_000_000,
    )


def test_the_waits_a_tick_closes_are_joined_from_one_read_of_their_runs_contexts(
    db_url: str, receiver: tuple[str, Receiver]
) -> None:
    protocol, got = receiver
    daemon = Daemon(db_url, protocol)
    reads: list[set[tuple[str, str]]] = []
    lookup = daemon.spans.traces
    assert lookup is not None

    def counted(runs: Any) -> Any:
        reads.append(set(runs))
        return lookup(runs)

    daemon.spans.traces = counted
    # Five threads reuse the run ids r1 and r2, each with contexts of its own.
    threads = [f"t{n}" for n in range(5)]
    asking = {t: f"00-{n + 1:032x}-{n + 1:016x}-01" for n, t in enumerate(threads)}
    answering = {t: f"00-{n + 101:032x}-{n + 101:016x}-01" for n, t in enumerate(threads)}
    for t in threads:
        daemon.feed(asked(t, traceparent=asking[t]), T0 + 2_000)
    daemon.auditor.tick(T0 + 30_000)
    for t in threads:
        daemon.feed(declined(t, traceparent=answering[t]), T0 + 63_000)
    daemon.auditor.tick(T0 + 90_000)
    daemon.close()

    spans = got.wait_for(lambda spans: len(spans) >= 5)
    assert [{(t, r) for t in threads for r in ("r1", "r2")}] == reads  # one read, both ticks
    by_thread = {s.attributes["gen_ai.conversation.id"]: s for s in spans}
    assert sorted(threads) == sorted(by_thread)
    for t, span in by_thread.items():
        assert (asking[t][3:35], asking[t][36:52]) == (span.trace_id, span.parent_span_id)
        assert [(answering[t][3:35], answering[t][36:52])] == [
            (trace, parent) for trace, parent, _ in span.links
        ]


def test_a_wait_that_reopens_and_closes_again_gets_a_second_span(
    db_url: str, receiver: tuple[str, Receiver]
) -> None:
    """docs/tracing.md: the first span (CANCELLED, a run moved past) was exported when the
    wait closed; a late answer reopens it, and its second closing is a span of its own, in the
    same trace, linking the run that answered."""
    protocol, got = receiver
    daemon = Daemon(db_url, protocol)
    daemon.feed(asked(traceparent=ASKING), T0 + 2_000)
    daemon.auditor.tick(T0 + 30_000)
    daemon.feed(moved_past(), T0 + 63_000)
    daemon.auditor.tick(T0 + 90_000)
    late = declined(at=T0 + 120_000, traceparent=ANSWERING)
    late = [{**line, "runId": "r3"} for line in late]
    daemon.feed(late, T0 + 123_000)
    daemon.auditor.tick(T0 + 150_000)
    daemon.close()

    spans = got.wait_for(lambda spans: len(spans) >= 2)
    assert [("t1/i1", "CANCELLED"), ("t1/i1", "CLOSED_BY_DECLINE")] == sorted(
        (s.attributes["sidewatch.approval.request_id"], s.attributes["sidewatch.approval.state"])
        for s in spans
    )
    assert {(TRACE, ASK)} == {(s.trace_id, s.parent_span_id) for s in spans}
    second = next(s for s in spans if s.attributes["sidewatch.approval.state"] != "CANCELLED")
    assert ("r3", "answered") in [
        (a["sidewatch.approval.run_id"], a["sidewatch.approval.link"]) for _, _, a in second.links
    ]


def test_a_run_that_moved_past_the_wait_is_linked_as_a_later_run(
    db_url: str, receiver: tuple[str, Receiver]
) -> None:
    protocol, got = receiver
    daemon = Daemon(db_url, protocol)
    daemon.feed(asked(traceparent=ASKING), T0 + 2_000)
    daemon.auditor.tick(T0 + 30_000)
    daemon.feed(moved_past(traceparent=ANSWERING), T0 + 63_000)
    daemon.auditor.tick(T0 + 90_000)
    daemon.close()

    (span,) = got.wait_for(lambda spans: len(spans) >= 1)
    assert "CANCELLED" == span.attributes["sidewatch.approval.state"]
    assert (TRACE, ASK) == (span.trace_id, span.parent_span_id)
    assert [("r2", "later_run")] == [
        (a["sidewatch.approval.run_id"], a["sidewatch.approval.link"]) for _, _, a in span.links
    ]


def test_a_wait_whose_asking_run_had_no_context_keeps_its_root_span(
    db_url: str, receiver: tuple[str, Receiver]
) -> None:
    protocol, got = receiver
    daemon = Daemon(db_url, protocol)
    daemon.feed([*asked(), *declined(traceparent=ANSWERING)], T0 + 63_000)
    daemon.auditor.tick(T0 + 90_000)
    daemon.close()

    (span,) = got.wait_for(lambda spans: len(spans) >= 1)
    assert "" == span.parent_span_id
    assert TRACE != span.trace_id
    # the answering run is still linked: its span is where the wait ended
    assert [("0af7651916cd43dd8448eb211c80319c", ANSWER)] == [(t, s) for t, s, _ in span.links]


@pytest.mark.parametrize(
    ("traceparent", "tracestate", "kept"),
    [
        ("00-" + "0" * 32 + f"-{ASK}-01", None, None),  # an all-zero trace id
        (f"00-{TRACE}-{'0' * 16}-01", None, None),  # an all-zero span id
        (f"ff-{TRACE}-{ASK}-01", None, None),  # the forbidden version
        (f"00-{TRACE.upper()}-{ASK}-01", None, None),  # upper case hex
        (f"00-{TRACE}-{ASK}-01-extra", None, None),  # version 00 with more fields
        (f"00-{TRACE}-{ASK}", None, None),  # no flags
        (42, None, None),  # not a string
        (ASKING, "no equals sign", (ASKING, None)),  # a bad tracestate alone is dropped
        (ASKING, ",".join(f"k{n}=v" for n in range(33)), (ASKING, None)),  # 33 members
    ],
)
def test_a_malformed_trace_context_is_a_finding_never_a_reject(
    db_url: str, traceparent: Any, tracestate: str | None, kept: tuple[str, str | None] | None
) -> None:
    engine = open_store(db_url)
    store = Store(engine)
    trace = {"traceparent": traceparent, **({"tracestate": tracestate} if tracestate else {})}
    body = b"\n".join(orjson.dumps(line) for line in asked(**trace))

    result = Ingest(store, ref_protector(engine, Config()), Config()).body("t", body, T0)
    with engine.connect() as c:
        findings = [tuple(r) for r in c.execute(text("SELECT rule, run_id FROM finding"))]
    found = run_traces(engine, [("t1", "r1")])
    engine.dispose()

    assert (3, 0) == (result.accepted, len(result.rejects))
    assert [("trace_context_malformed", "r1")] == findings
    assert ({("t1", "r1"): kept} if kept else {}) == found


def test_a_valid_context_is_kept_per_run_the_first_one_stored_winning(db_url: str) -> None:
    engine = open_store(db_url)
    store = Store(engine)
    lines = [
        *asked(traceparent=ASKING, tracestate="a=1, b@tenant=two"),
        # a later version, read as 00: its extra fields are not kept
        {
            "type": "RUN_STARTED",
            "threadId": "t1",
            "runId": "r2",
            "timestamp": T0,
            "traceparent": f"01-{TRACE}-{ANSWER}-00-future",
        },
        {**run_input("r2"), "traceparent": ANSWERING},
        {**run_input("r1", "t2"), "traceparent": ANSWERING},  # the same run id, another thread
    ]
    body = b"\n".join(orjson.dumps(line) for line in lines)

    Ingest(store, ref_protector(engine, Config()), Config()).body("t", body, T0)
    found = run_traces(engine, [("t1", "r1"), ("t1", "r2"), ("t1", "r3"), ("t2", "r1")])
    with engine.connect() as c:
        findings = c.execute(text("SELECT count(*) FROM finding")).scalar()
    engine.dispose()

    assert {
        ("t1", "r1"): (ASKING, "a=1, b@tenant=two"),
        ("t1", "r2"): (f"01-{TRACE}-{ANSWER}-00", None),
        ("t2", "r1"): (ANSWERING, None),  # the same run id in another thread: its own
    } == found
    assert 0 == findings


def test_the_protocol_is_the_traces_own_else_the_general_one_else_http() -> None:
    assert "http/protobuf" == protocol_of({})
    assert "grpc" == protocol_of({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    both = {
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
    }
    assert "http/protobuf" == protocol_of(both)
    assert (
        from_environment(
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}
        )
        is None
    )


def test_the_read_of_a_tick_s_contexts_searches_each_run_by_its_key(db_url: str) -> None:
    """The statement's plan on the store under test: `run_trace` searched by its unique key
    for each run asked for, never scanned (its size is the store's age). PostgreSQL is told to
    avoid a scan wherever it can, so that its plan on an empty table shows whether it could."""
    engine = open_store(db_url)
    with engine.connect() as c:
        sqlite = c.dialect.name == "sqlite"
        if not sqlite:
            c.exec_driver_sql("SET enable_seqscan = off")
        explain = "EXPLAIN QUERY PLAN " if sqlite else "EXPLAIN "
        sql = explain + driver_sql(c, select_sql(2))
        plan = [str(row[-1]) for row in c.exec_driver_sql(sql, ("a", "b") * 2)]
    engine.dispose()

    if sqlite:
        assert any(step.startswith("SEARCH t USING INDEX") for step in plan), plan
        assert not any(step.startswith("SCAN t") for step in plan), plan
    else:
        assert any("Index" in step and "run_trace" in step for step in plan), plan
        assert not any("Seq Scan on run_trace" in step for step in plan), plan
