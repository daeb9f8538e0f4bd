"""Writes prometheusrule.yaml: `sidewatch rules --format prometheusrule`, the rules of
rules/sidewatch.rules.yml as a PrometheusRule (prometheus-operator). tests/test_deploy.py keeps
it generated. Run: python deploy/kubernetes/make_rules.py (or the command itself, with your
--selector and --external-url, for your cluster)."""

from __future__ import annotations

from pathlib import Path

from sidewatch.exporters.mixin import prometheus_rule

OUT = Path(__file__).parent / "base" / "prometheusrule.yaml"

if __name__ == "__main__":
    OUT.write_text(prometheus_rule())
