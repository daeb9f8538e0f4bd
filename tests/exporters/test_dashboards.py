"""The Grafana dashboards: provisionable from a file (a data source variable, no import
placeholders), naming only exported metrics, and every panel query answered by a real Prometheus
scraping a real `sidewatch serve` fed the reference stream. Also: every `sidewatch_*` name in
`rules/` and `dashboards/` is exported by a live scrape."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.daemon.test_e2e import Server, _audited, _seed_relative_to_now, _start, _stop, _wait_for
from tests.daemon.test_nats import NATS_URL, Stream, _js, _publish
from tests.realprom import RealPrometheus

ROOT = Path(__file__).resolve().parents[2]
OVERVIEW = ROOT / "dashboards" / "sidewatch-overview.json"
DASHBOARDS = sorted((ROOT / "dashboards").glob("*.json"))
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
NAME = re.compile(r"(?<![A-Za-z0-9_:])sidewatch_[A-Za-z0-9_:]+")
# Grafana's macros as a query would see them over a few minutes of 1 s scrapes.
MACROS = {"$__rate_interval": "1m", "$__interval": "15s", "$__range": "5m"}
LABEL_VALUES = re.compile(r"^label_values\((?P<metric>.+),\s*(?P<label>\w+)\)$")
# Where a dashboard holds queries; where a rule file and its promtool tests name series.
QUERY_KEYS = {"expr", "query", "definition"}
RULE_KEYS = {"expr", "series", "labels"}
OPEN_STATES = ("WAITING", "STALE", "UNROUTABLE", "ORPHANED", "STUCK_AFTER_DECISION")


@dataclass(frozen=True)
class Query:
    where: str  # "panel title/refId" or "variable name"
    expr: str
    legend_labels: tuple[str, ...]


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, including those folded inside collapsed rows."""
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def strings_under(node: object, keys: set[str]) -> Iterator[str]:
    """Every string value held under one of `keys`, anywhere in a JSON or YAML document."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in keys and isinstance(value, str):
                yield value
            yield from strings_under(value, keys)
    elif isinstance(node, list):
        for value in node:
            yield from strings_under(value, keys)


def substituted(expr: str, dashboard: dict[str, Any]) -> str:
    """`expr` as Prometheus receives it: macros replaced, each variable set to "All"."""
    for macro, value in MACROS.items():
        expr = expr.replace(macro, value)
    for var in dashboard["templating"]["list"]:
        every = var.get("allValue") or ".*"
        expr = expr.replace(f"${{{var['name']}}}", every).replace(f"${var['name']}", every)
    return expr


def queries(dashboard: dict[str, Any]) -> list[Query]:
    """Every panel target, and each `label_values` variable as the query that lists its values."""
    out = [
        Query(
            f"{panel['title']}/{t['refId']}",
            substituted(t["expr"], dashboard),
            tuple(re.findall(r"\{\{\s*(\w+)\s*\}\}", t.get("legendFormat", ""))),
        )
        for panel in panels(dashboard)
        for t in panel.get("targets", [])
    ]
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query" and (m := LABEL_VALUES.match(var["definition"])):
            expr = f"count by ({m['label']}) ({substituted(m['metric'], dashboard)})"
            out.append(Query(f"variable {var['name']}", expr, (m["label"],)))
    return out


def documented() -> set[str]:
    """The series names the metrics reference promises (histograms with their suffixes)."""
    section = (ROOT / "docs" / "reference" / "metrics.md").read_text()
    names = set()
    for row in section.splitlines():
        cells = [c.strip() for c in row.strip("|").split("|")]
        for name in re.findall(r"`(sidewatch_\w+)`", cells[0]):
            names.add(name)
            if len(cells) > 1 and cells[1] == "histogram":
                names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
    return names


def document(path: Path) -> object:
    return load(path) if path.suffix == ".json" else yaml.safe_load(path.read_text())


def used_names(path: Path) -> set[str]:
    """`sidewatch_*` names in a dashboard's queries, or in a rule file's expressions and test
    series (annotations and descriptions are prose, not queries)."""
    keys = QUERY_KEYS if path.suffix == ".json" else RULE_KEYS
    return {n for text in strings_under(document(path), keys) for n in NAME.findall(text)}


def recorded_names(paths: list[Path]) -> set[str]:
    """The series the rule files' recording rules define (and their unit tests may read)."""
    return {n for p in paths for n in strings_under(document(p), {"record"})}


# -- the files -----------------------------------------------------------------------------


def test_the_overview_dashboard_is_among_the_dashboards() -> None:
    assert OVERVIEW in DASHBOARDS


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_a_dashboard_is_provisionable_json_without_import_placeholders(path: Path) -> None:
    text = path.read_text()

    dashboard = json.loads(text)

    assert "__inputs" not in dashboard
    assert [] == re.findall(r"\$\{DS_\w+\}", text)
    assert dashboard["uid"]
    assert 39 <= dashboard["schemaVersion"]


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_every_panel_and_query_reads_the_datasource_variable(path: Path) -> None:
    dashboard = load(path)
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}

    elsewhere = [
        (panel.get("title"), where.get("refId", "panel"), where.get("datasource"))
        for panel in panels(dashboard)
        if panel["type"] != "row"
        for where in (panel, *panel.get("targets", []))
        if where.get("datasource", panel.get("datasource")) != DATASOURCE  # targets inherit
    ]
    elsewhere += [
        (f"variable {v['name']}", "query", v.get("datasource"))
        for v in variables.values()
        if v["type"] == "query" and v.get("datasource") != DATASOURCE
    ]

    assert ("datasource", "prometheus") == (
        variables["datasource"]["type"],
        variables["datasource"]["query"],
    )
    assert [] == elsewhere


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_panels_have_unique_ids_and_fit_the_grid(path: Path) -> None:
    everything = list(panels(load(path)))
    ids = [p["id"] for p in everything]

    assert len(ids) == len(set(ids))
    assert [] == [p["title"] for p in everything if p["gridPos"]["x"] + p["gridPos"]["w"] > 24]


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_every_metric_a_dashboard_queries_is_in_the_readme_metrics_table(path: Path) -> None:
    names = used_names(path)

    assert names
    assert set() == names - documented()


# -- against a real sidewatch and a real Prometheus ----------------------------------------


@dataclass(frozen=True)
class Stack:
    sidewatch: Server
    prometheus: RealPrometheus


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, module_db_url: str) -> Iterator[Stack]:
    """sidewatch serving, scraped by Prometheus from before the reference stream (shifted to
    now) is posted, so that rates see the stream arrive; ready once a tick has audited it.
    It also consumes a JetStream stream of its own on the real NATS server (for the
    JetStream panels and alerts), through which the same stream is published once more: one
    message stored, its facts all stored before, so the audit is unchanged."""
    tmp = tmp_path_factory.mktemp("stack")
    stream = Stream(f"SWDASH_{uuid.uuid4().hex[:12]}", f"swdash.{uuid.uuid4().hex[:12]}")
    _js(lambda js: js.add_stream(name=stream.name, subjects=[f"{stream.subject}.>"]))
    server = _start(
        tmp,
        module_db_url,
        extra=f"nats: {{url: '{NATS_URL}', stream: {stream.name}, "
        f"subject: '{stream.subject}.>', batch: 8, ackWait: 2s, retryDelay: 300ms}}\n",
    )
    # The target carries cluster and namespace labels, as a Kubernetes scrape's would: the
    # dashboard's optional variables list them.
    prometheus = RealPrometheus(
        tmp, server.url.removeprefix("http://"), labels={"cluster": "c1", "namespace": "ops"}
    )
    try:
        prometheus.start()
        assert prometheus.wait_for("sidewatch_waits"), "Prometheus never scraped sidewatch"
        body, _ = _seed_relative_to_now()
        posted = httpx.post(
            f"{server.url}/v1/events",
            content=body,
            headers={"content-type": "application/x-ndjson"},
        )
        assert 200 == posted.status_code
        assert _wait_for(lambda: _audited(server, 6))
        assert prometheus.wait_for("sum(sidewatch_waits) == 5"), "the audit was never scraped"
        _publish(stream, body)
        assert prometheus.wait_for(
            'sidewatch_jetstream_messages_total{outcome="stored"} == 1', seconds=30
        ), "the JetStream message was never stored"
        assert prometheus.wait_for("sidewatch_jetstream_pending == 0"), "no lag was reported"
        yield Stack(server, prometheus)
    finally:
        prometheus.stop()
        _stop(server)
        _js(lambda js: js.delete_stream(stream.name))


@pytest.mark.parametrize("query", queries(load(OVERVIEW)), ids=lambda q: q.where)
def test_every_overview_query_returns_series_from_real_prometheus(
    stack: Stack, query: Query
) -> None:
    result = stack.prometheus.wait_for(query.expr, seconds=10)

    assert result, f"{query.where}: no series for {query.expr}"
    assert [] == [s["metric"] for s in result if not set(query.legend_labels) <= set(s["metric"])]


def test_the_overview_reads_the_reference_audit_from_real_prometheus(stack: Stack) -> None:
    by_state = queries(load(OVERVIEW))
    expr = next(q.expr for q in by_state if q.where == "Open waits by state/A")

    result = stack.prometheus.query(expr)

    assert dict.fromkeys(OPEN_STATES, "1") == {s["metric"]["state"]: s["value"][1] for s in result}


def test_every_sidewatch_name_in_rules_and_dashboards_is_exported_by_a_live_scrape(
    stack: Stack,
) -> None:
    rules = sorted((ROOT / "rules").rglob("*.y*ml"))
    files = [*rules, *DASHBOARDS]
    exposition = httpx.get(f"{stack.sidewatch.url}/metrics").text
    exported = {s.name for f in text_string_to_metric_families(exposition) for s in f.samples}
    known = exported | recorded_names(rules)

    unknown = {p.name: sorted(used_names(p) - known) for p in files}

    assert used_names(OVERVIEW) <= exported
    assert {p.name: [] for p in files} == unknown


def test_the_overview_links_its_tables_and_panels_to_the_wait_pages() -> None:
    dashboard = load(OVERVIEW)
    links = {
        panel["title"]: link["url"]
        for panel in panels(dashboard)
        for link in panel.get("fieldConfig", {}).get("defaults", {}).get("links", [])
    }
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}

    assert "textbox" == variables["sidewatch_url"]["type"]
    assert "${sidewatch_url}/ui/waits?state=${__field.labels.state}" == links["Open waits by state"]
    assert "${sidewatch_url}/ui/waits" == links["Problem waits open"]
    assert "${sidewatch_url}/ui/waits" in [link["url"] for link in dashboard["links"]]


def test_the_overview_watches_sidewatch_itself() -> None:
    exprs = " ".join(q.expr for q in queries(load(OVERVIEW)))

    for name in (
        'up{job=~".*", cluster=~".*", namespace=~".*"}',
        "sidewatch_http_responses_total",
        "sidewatch_report_failures_total",
        "sidewatch_report_last_success_timestamp_seconds",
        "sidewatch_alertmanager_push_failures_total",
    ):
        assert name in exprs, name


def test_the_overview_watches_the_jetstream_consumer_from_real_prometheus(stack: Stack) -> None:
    by_panel = {q.where: q.expr for q in queries(load(OVERVIEW))}

    consuming = stack.prometheus.query(by_panel["JetStream consuming/A"])
    pending = stack.prometheus.query(by_panel["JetStream pending (consumer lag)/A"])
    # The panel's rate as an increase since the stack started: one message, stored.
    since_start = by_panel["JetStream messages by outcome/A"].replace("rate(", "increase(")
    outcomes = stack.prometheus.query(since_start.replace("[1m]", "[1h]"))

    assert ["1"] == [s["value"][1] for s in consuming]
    assert ["0"] == [s["value"][1] for s in pending]
    assert {"stored", "duplicate", "unreadable", "refused", "retry"} == {
        s["metric"]["outcome"] for s in outcomes
    }
    assert [] == [
        s["metric"]["outcome"]
        for s in outcomes
        if (float(s["value"][1]) > 0) != (s["metric"]["outcome"] == "stored")
    ]
