"""rules/: promtool accepts and unit-tests them; every alert carries its owner, severity and
a runbook that exists; a decline never alerts."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from sidewatch.core import model
from sidewatch.core.vocab import FindingRule, LineKind, RejectReason

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "rules" / "sidewatch.rules.yml"
UNPACKED = ROOT / ".tools" / "prometheus" / "usr" / "bin" / "promtool"
# Paths in the default output (`sidewatch rules`; absolute under `--external-url`): the daemon
# serves sidewatch/daemon/runbooks/ and its wait list.
RUNBOOK_URL = "/runbooks/"
DASHBOARD_URL = "/ui/waits"
RUNBOOKS = ROOT / "sidewatch" / "daemon" / "runbooks"
OWNERS = {
    "approver",
    "requester",
    "policy_owner",
    "runtime_owner",
    "platform",
    "sidewatch_operator",
}


# The labels whose values are a vocabulary of core, and the values each may take.
VOCABULARIES: dict[str, set[str]] = {
    "state": {s.value for s in model.State},
    "from": {"none", *(s.value for s in model.State)},
    "to": {s.value for s in model.State},
    "missing": {v for labels in model.UNREPORTED_LABELS.values() for v in labels},
    "rule": {r.value for r in FindingRule},
    "reason": {r.value for r in RejectReason},
    "kind": {k.value for k in LineKind},
}
MATCHER = re.compile(r'\b([a-z_]+)\s*(=~|!~|!=|=)\s*"([^"]*)"')


def promtool() -> str:
    """promtool as `make test` unpacks it (or SIDEWATCH_PROMTOOL); missing is a failure."""
    path = os.environ.get("SIDEWATCH_PROMTOOL") or str(UNPACKED)
    if not Path(path).is_file():
        pytest.fail(f"promtool not found at {path}: `make test` unpacks it")
    return path


def alerts() -> list[dict]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [r for g in groups for r in g["rules"] if "alert" in r]


def test_promtool_check_rules_accepts_them() -> None:
    done = subprocess.run(
        [promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, check=False
    )

    assert 0 == done.returncode, done.stdout + done.stderr


def test_promtool_unit_tests_of_the_rules_pass() -> None:
    tests = sorted((ROOT / "rules" / "tests").glob("*.yml"))

    done = subprocess.run(
        [promtool(), "test", "rules", *map(str, tests)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT / "rules" / "tests",
    )

    assert tests
    assert 0 == done.returncode, done.stdout + done.stderr


def test_every_alert_has_severity_owner_summary_description_a_runbook_and_a_dashboard() -> None:
    bad = []
    for rule in alerts():
        labels, notes = rule.get("labels", {}), rule.get("annotations", {})
        if labels.get("owner") not in OWNERS or not labels.get("severity"):
            bad.append(f"{rule['alert']}: labels {labels}")
        if not str(notes.get("dashboard_url", "")).startswith(DASHBOARD_URL):
            bad.append(f"{rule['alert']}: dashboard_url {notes.get('dashboard_url')}")
        if not {"summary", "description", "runbook_url"} <= set(notes):
            bad.append(f"{rule['alert']}: annotations {sorted(notes)}")
        elif not (
            notes["runbook_url"].startswith(RUNBOOK_URL)
            and (RUNBOOKS / notes["runbook_url"][len(RUNBOOK_URL) :]).is_file()
        ):
            bad.append(f"{rule['alert']}: no runbook at {notes['runbook_url']}")

    assert [] == bad


def test_severities_are_the_mixin_vocabulary_critical_warning_info() -> None:
    severities = {rule["alert"]: rule["labels"]["severity"] for rule in alerts()}

    assert {} == {k: v for k, v in severities.items() if v not in ("critical", "warning", "info")}


def test_sidewatch_down_and_not_scraped_and_its_own_health_alert() -> None:
    exprs = {rule["alert"]: str(rule["expr"]) for rule in alerts()}

    assert 'up{job="sidewatch"} == 0' == exprs["SidewatchDown"]
    assert 'absent(up{job="sidewatch"})' == exprs["SidewatchNotScraped"]
    assert "sidewatch_audit_interval_seconds" in exprs["SidewatchAuditorStalled"]
    assert "120" not in exprs["SidewatchAuditorStalled"]


def test_every_alertable_state_has_its_alert_and_a_decline_never_alerts() -> None:
    exprs = {rule["alert"]: str(rule["expr"]) for rule in alerts()}

    for state in ("STUCK_AFTER_DECISION", "ORPHANED", "UNROUTABLE", "STALE", "WAITING"):
        assert any(f'state="{state}"' in e for e in exprs.values()), state
    assert not any("DECLINE" in e for e in exprs.values())
    assert {"SidewatchAuditorStalled", "SidewatchIngestRejecting"} <= set(exprs)


def test_every_runbook_says_what_it_means_how_to_confirm_the_next_move_and_what_never_to_do() -> (
    None
):
    missing = [
        f"{path.name}: {section}"
        for path in sorted(RUNBOOKS.glob("*.md"))
        for section in ("## What it means", "## Confirm", "## Next safe move", "## Never")
        if section not in path.read_text()
    ]

    assert [] == missing


def unknown_label_values(folder: Path) -> list[str]:
    """Every label matcher in the rules and their tests (`state="…"`, `rule=~"a|b"`) whose label
    is a vocabulary of core and whose value is no member of it."""
    bad = []
    for path in sorted(folder.rglob("*.yml")):
        for label, op, value in MATCHER.findall(path.read_text()):
            allowed = VOCABULARIES.get(label)
            values = value.split("|") if op in ("=~", "!~") else [value]
            if allowed is not None and not set(values) <= allowed:
                bad.append(f"{path.relative_to(folder)}: {label}{op}{value!r}")
    return bad


def test_every_label_value_in_the_rules_is_a_member_of_its_vocabulary() -> None:
    matched = [m for p in (ROOT / "rules").rglob("*.yml") for m in MATCHER.findall(p.read_text())]

    assert {"state", "missing", "reason"} <= {label for label, _, _ in matched}
    assert [] == unknown_label_values(ROOT / "rules")


def test_a_label_value_that_is_no_member_is_caught_in_a_copy_of_the_rules(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "rules", tmp_path / "rules")
    copy = tmp_path / "rules" / "sidewatch.rules.yml"
    text = copy.read_text().replace('state="STALE"', 'state="STALLED"', 1)
    copy.write_text(
        text.replace("sum by (reason)", 'sum by (reason) (x{rule="no_such_rule"}) or', 1)
    )

    assert [
        "sidewatch.rules.yml: rule='no_such_rule'",
        "sidewatch.rules.yml: state='STALLED'",
    ] == sorted(unknown_label_values(tmp_path / "rules"))


def test_every_severity_is_a_member_and_each_state_alert_has_the_state_severity_of_core() -> None:
    found: dict[str, str] = {}
    for rule in alerts():
        states = set(re.findall(r'sidewatch_\w+\{[^}]*state="([A-Z_]+)"\}', str(rule["expr"])))
        if len(states) == 1:
            found[states.pop()] = rule["labels"]["severity"]

    assert {r["labels"]["severity"] for r in alerts()} <= {s.value for s in model.Severity}
    assert {s.value: v.value for s, v in model.SEVERITY.items()} == found


def test_the_jetstream_alerts_read_only_its_gauges_and_their_threshold_is_the_documented_one() -> (
    None
):
    rules = {rule["alert"]: rule for rule in alerts()}
    lagging = str(rules["SidewatchJetStreamLagging"]["expr"])
    threshold = re.fullmatch(r".*\) > (\d+)", lagging)
    runbook = (RUNBOOKS / "jetstream-lag.md").read_text()
    alerting = (ROOT / "docs" / "alerting.md").read_text()

    assert (
        'max(sidewatch_jetstream_consuming{job="sidewatch"}) == 0'
        == rules["SidewatchJetStreamNotConsuming"]["expr"]
    )
    assert ("critical", "5m") == (
        rules["SidewatchJetStreamNotConsuming"]["labels"]["severity"],
        rules["SidewatchJetStreamNotConsuming"]["for"],
    )
    assert ("warning", "10m") == (
        rules["SidewatchJetStreamLagging"]["labels"]["severity"],
        rules["SidewatchJetStreamLagging"]["for"],
    )
    assert threshold is not None
    assert f"`sidewatch_jetstream_pending` above {threshold[1]}" in runbook
    assert f"pending messages above {threshold[1]} for 10 min" in alerting
