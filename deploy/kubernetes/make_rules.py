"""Writes prometheusrule.yaml: rules/sidewatch.rules.yml as a PrometheusRule (Prometheus
Operator). tests/test_deploy.py keeps the two identical. Run: python deploy/kubernetes/make_rules.py"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "rules" / "sidewatch.rules.yml"
OUT = Path(__file__).parent / "base" / "prometheusrule.yaml"


def prometheus_rule() -> str:
    groups: Any = yaml.safe_load(RULES.read_text())["groups"]
    doc = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "sidewatch", "labels": {"app.kubernetes.io/name": "sidewatch"}},
        "spec": {"groups": groups},
    }
    header = "# Generated from rules/sidewatch.rules.yml by make_rules.py: do not edit.\n"
    return header + yaml.safe_dump(doc, sort_keys=False, width=100)


if __name__ == "__main__":
    OUT.write_text(prometheus_rule())
