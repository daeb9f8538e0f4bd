"""deploy/: the systemd unit passes `systemd-analyze verify` and the PrometheusRule is rules/ as
generated. The container: tests/deploy/test_container.py; Kubernetes: tests/deploy/."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
sys.path.insert(0, str(DEPLOY / "kubernetes"))
from make_rules import prometheus_rule  # noqa: E402


def test_the_systemd_unit_verifies(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is not installed (Debian's systemd package)"
    sidewatch = Path(sys.executable).with_name("sidewatch")
    unit = (DEPLOY / "sidewatch.service").read_text()
    for key in ("DynamicUser=yes", "ProtectSystem=strict", "StateDirectory=sidewatch"):
        assert key in unit
    # The same unit, with ExecStart on this machine's sidewatch (verify checks it exists).
    local = tmp_path / "sidewatch.service"
    local.write_text(unit.replace("/usr/local/bin/sidewatch", str(sidewatch)))
    done = subprocess.run(
        [analyze, "verify", str(local)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "sidewatch.service" not in done.stderr, done.stderr


def test_the_prometheus_rule_is_rules_as_generated() -> None:
    written = (DEPLOY / "kubernetes" / "base" / "prometheusrule.yaml").read_text()
    assert written == prometheus_rule(), "run python deploy/kubernetes/make_rules.py"
    rules = yaml.safe_load((ROOT / "rules" / "sidewatch.rules.yml").read_text())
    assert yaml.safe_load(written)["spec"]["groups"] == rules["groups"]
