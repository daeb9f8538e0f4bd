"""`sidewatch rules` and `sidewatch dashboard`: the checked-in rules/, dashboards/ and the
PrometheusRule are their output with the defaults; another selector reaches every query (and
its promtool tests pass, links absolute under --external-url); a bad selector or URL is a usage
error."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from sidewatch.cli.main import cli
from tests.rules.test_rules import promtool

ROOT = Path(__file__).resolve().parents[2]
AGENTS = ROOT / "rules" / "tests" / "selector" / "agents_test.yml"
SELECTOR = 'job="agents", namespace="ops"'
URL = "https://sidewatch.example"
# A vector selector of a sidewatch series or of `up`, with its matchers if any.
VECTOR = re.compile(r'(?<![\w:"$])(sidewatch_\w+|up)(?![\w:(])(\{[^{}]*\})?')


def run(*args: str) -> str:
    done = CliRunner().invoke(cli, list(args))
    assert 0 == done.exit_code, done.output
    return done.output


@pytest.mark.parametrize(
    ("args", "path"),
    [
        (("rules",), "rules/sidewatch.rules.yml"),
        (("dashboard",), "dashboards/sidewatch-overview.json"),
        (("rules", "--format", "prometheusrule"), "deploy/kubernetes/base/prometheusrule.yaml"),
    ],
    ids=["rules", "dashboard", "prometheusrule"],
)
def test_the_checked_in_file_is_the_command_output_with_the_defaults(
    args: tuple[str, ...], path: str
) -> None:
    assert (ROOT / path).read_text() == run(*args), f"run: sidewatch {' '.join(args)} > {path}"


def expressions(text: str) -> list[str]:
    return [str(r["expr"]) for g in yaml.safe_load(text)["groups"] for r in g["rules"]]


def test_the_selector_reaches_every_series_of_every_expression() -> None:
    exprs = expressions(run("rules", "--selector", SELECTOR))
    selectors = [m for e in exprs for m in VECTOR.finditer(e)]

    # every sidewatch_ name and `up(`/`up{` there is, as a plain count: none missed by VECTOR
    assert sum(len(re.findall(r"sidewatch_\w+|\bup\b", e)) for e in exprs) == len(selectors)
    assert [] == [m[0] for m in selectors if not (m[2] or "").startswith("{" + SELECTOR)]
    assert "up{" + SELECTOR + "} == 0" in exprs
    assert "absent(up{" + SELECTOR + "})" in exprs
    assert not any("sidewatch" in m[2] for e in exprs for m in VECTOR.finditer(e) if m[2])


def test_every_alert_links_absolutely_under_the_external_url() -> None:
    text = run("rules", "--external-url", URL + "/")
    notes = [r["annotations"] for g in yaml.safe_load(text)["groups"] for r in g["rules"]
             if "alert" in r]  # fmt: skip

    assert notes
    assert [] == [
        n for n in notes
        if not (n["runbook_url"].startswith(f"{URL}/runbooks/")
                and n["dashboard_url"].startswith(f"{URL}/ui/waits"))
    ]  # fmt: skip
    assert "$externalLabels" not in text


def test_promtool_unit_tests_of_rules_generated_for_another_job_and_url(tmp_path: Path) -> None:
    (tmp_path / "sidewatch.rules.yml").write_text(
        run("rules", "--selector", SELECTOR, "--external-url", URL)
    )
    shutil.copy(AGENTS, tmp_path)

    done = subprocess.run(
        [promtool(), "test", "rules", AGENTS.name],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )

    assert 0 == done.returncode, done.stdout + done.stderr


def test_the_prometheus_rule_holds_the_rules_groups_with_the_selector() -> None:
    rule = yaml.safe_load(run("rules", "--selector", SELECTOR, "--format", "prometheusrule"))
    plain = yaml.safe_load(run("rules", "--selector", SELECTOR))

    assert ("monitoring.coreos.com/v1", "PrometheusRule") == (rule["apiVersion"], rule["kind"])
    assert plain["groups"] == rule["spec"]["groups"]


def test_the_dashboard_scopes_every_query_by_job_cluster_and_namespace_from_the_selector() -> None:
    board = json.loads(run("dashboard", "--selector", SELECTOR))
    variables = {v["name"]: v for v in board["templating"]["list"]}
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    exprs += [t["expr"] for p in board["panels"] for q in p.get("panels", [])
              for t in q.get("targets", [])]  # fmt: skip
    scope = 'job=~"$job", cluster=~"$cluster", namespace=~"$namespace"'

    assert ["datasource", "job", "cluster", "namespace"] == list(variables)[:4]
    assert f"label_values(up{{{SELECTOR}}}, job)" == variables["job"]["query"]
    assert variables["namespace"]["query"].startswith(f"label_values(up{{{SELECTOR}, job=~")
    assert "up{" + scope + "}" in exprs
    assert [] == [
        m[0] for e in exprs for m in VECTOR.finditer(e) if not (m[2] or "").startswith("{" + scope)
    ]
    assert 'job="sidewatch"' not in json.dumps(board)


@pytest.mark.parametrize(
    "args",
    [
        ("rules", "--selector", 'job="unterminated'),
        ("rules", "--selector", "job=sidewatch"),
        ("rules", "--selector", 'job="a" namespace="b"'),
        ("rules", "--selector", 'job="{{ $value }}"'),
        ("rules", "--external-url", "sidewatch.example"),
        ("rules", "--external-url", "https://sidewatch.example/x'y"),
        ("dashboard", "--selector", ""),
    ],
)
def test_a_bad_selector_or_url_is_a_usage_error(args: tuple[str, ...]) -> None:
    done = CliRunner().invoke(cli, list(args))

    assert 2 == done.exit_code, done.output
    assert "Invalid value" in done.output
