"""sidewatch watching itself: HTTP answers by route and code, the nightly report's runs,
failures and last success, and the audit interval the stalled-auditor alert compares with.
Counted here, exported at scrape time by one collector."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

UNMATCHED = "other"  # a path no route serves (its text is never a label: unbounded)


@dataclass
class SelfCounters:
    """Mutated by the request path and the report job; read by the collector."""

    answers: Counter[tuple[str, str]] = field(default_factory=Counter)  # (route, code)
    report_runs: int = 0
    report_failures: int = 0
    report_last_success: float = 0.0  # epoch seconds; 0: none yet
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answered(self, route: str, status: int) -> None:
        with self.lock:
            self.answers[(route, str(status))] += 1

    def report_ran(self, ok: bool, now: float | None = None) -> None:
        with self.lock:
            self.report_runs += 1
            if ok:
                self.report_last_success = time.time() if now is None else now
            else:
                self.report_failures += 1


class CountAnswers:
    """ASGI middleware: counts each HTTP answer by the route template that served it (e.g.
    `/v1/waits/{request_id:path}`) and its status code."""

    def __init__(self, app: ASGIApp, counters: SelfCounters, routes: Sequence[BaseRoute]) -> None:
        self.app = app
        self.counters = counters
        self.routes = routes

    def route_of(self, scope: Scope) -> str:
        partial = None
        for route in self.routes:
            match, _ = route.matches(scope)
            if match is Match.FULL:
                return str(getattr(route, "path", UNMATCHED))
            if match is Match.PARTIAL and partial is None:  # the path, with another method
                partial = str(getattr(route, "path", UNMATCHED))
        return partial or UNMATCHED

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        route = self.route_of(scope)

        async def counted(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.counters.answered(route, int(message["status"]))
            await send(message)

        await self.app(scope, receive, counted)


class SelfCollector(Collector):
    def __init__(self, counters: SelfCounters, routes: Sequence[str], interval_ms: int) -> None:
        self.counters = counters
        self.routes = routes
        self.interval_ms = interval_ms

    def collect(self) -> Iterator[Metric]:
        c = self.counters
        with c.lock:
            answers = dict(c.answers)
            runs, failures, last = c.report_runs, c.report_failures, c.report_last_success
        http = CounterMetricFamily(
            "sidewatch_http_responses",
            "HTTP answers by the route that served them and their status code.",
            labels=["route", "code"],
        )
        for route in self.routes:  # every route is present, 0 until answered
            answers.setdefault((route, "200"), 0)
        for (route, code), n in sorted(answers.items()):
            http.add_metric([route, code], n)
        yield http
        ran = CounterMetricFamily("sidewatch_report_runs", "Scheduled report runs.")
        ran.add_metric([], runs)
        yield ran
        failed = CounterMetricFamily(
            "sidewatch_report_failures", "Scheduled report runs that wrote no report."
        )
        failed.add_metric([], failures)
        yield failed
        when = GaugeMetricFamily(
            "sidewatch_report_last_success_timestamp_seconds",
            "When the last scheduled report was written (0: none since the daemon started).",
        )
        when.add_metric([], last)
        yield when
        interval = GaugeMetricFamily(
            "sidewatch_audit_interval_seconds",
            "auditor.interval: how often the auditor ticks (the stalled alert allows four).",
        )
        interval.add_metric([], self.interval_ms / 1000)
        yield interval
