"""deploy/: the systemd unit passes `systemd-analyze verify`, the Kubernetes manifests hold
the fields the deployment relies on (a JSON-schema check), the PrometheusRule is rules/ as
generated. The container: tests/deploy/test_container.py; Kubernetes: tests/deploy/."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from sidewatch.config import Config

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


def _obj(required: list[str], **props: Any) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": props}


PROBE = _obj(["httpGet"], httpGet=_obj(["path", "port"]))
CONTAINER = _obj(
    ["name", "image", "livenessProbe", "readinessProbe", "ports"],
    livenessProbe={**PROBE, "properties": {"httpGet": _obj(["path"], path={"const": "/healthz"})}},
    readinessProbe={**PROBE, "properties": {"httpGet": _obj(["path"], path={"const": "/readyz"})}},
)
# Above the daemon's default shutdown bound, so Kubernetes never kills it mid-drain.
GRACE = Config().shutdown_timeout_ms // 1000 + 1
SCHEMAS = {
    "Deployment": _obj(
        ["apiVersion", "metadata", "spec"],
        apiVersion={"const": "apps/v1"},
        spec=_obj(
            ["selector", "template"],
            template=_obj(
                ["metadata", "spec"],
                spec=_obj(
                    ["containers", "terminationGracePeriodSeconds", "securityContext"],
                    terminationGracePeriodSeconds={"type": "integer", "minimum": GRACE},
                    securityContext=_obj(["runAsNonRoot"], runAsNonRoot={"const": True}),
                    containers={"type": "array", "minItems": 1, "items": CONTAINER},
                ),
            ),
        ),
    ),
    "Service": _obj(["spec"], apiVersion={"const": "v1"}, spec=_obj(["selector", "ports"])),
    "ServiceMonitor": _obj(
        ["spec"],
        apiVersion={"const": "monitoring.coreos.com/v1"},
        spec=_obj(
            ["selector", "endpoints"],
            endpoints={
                "type": "array",
                "items": _obj(["port", "path"], path={"const": "/metrics"}),
            },
        ),
    ),
    "PrometheusRule": _obj(
        ["spec"],
        apiVersion={"const": "monitoring.coreos.com/v1"},
        spec=_obj(["groups"], groups={"type": "array", "minItems": 1}),
    ),
}


def test_the_kubernetes_manifests_hold_what_the_deployment_relies_on() -> None:
    docs = [
        d
        for f in sorted((DEPLOY / "kubernetes").glob("*.yaml"))
        for d in yaml.safe_load_all(f.read_text())
        if d
    ]
    assert sorted(d["kind"] for d in docs) == sorted(SCHEMAS)
    for doc in docs:
        jsonschema.validate(doc, SCHEMAS[doc["kind"]])
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_the_prometheus_rule_is_rules_as_generated() -> None:
    written = (DEPLOY / "kubernetes" / "prometheusrule.yaml").read_text()
    assert written == prometheus_rule(), "run python deploy/kubernetes/make_rules.py"
    rules = yaml.safe_load((ROOT / "rules" / "sidewatch.rules.yml").read_text())
    assert yaml.safe_load(written)["spec"]["groups"] == rules["groups"]
