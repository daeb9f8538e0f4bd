"""deploy/kubernetes renders (base, overlays and the default at its root) and every rendered
object is valid against the Kubernetes JSON schemas (kubernetes-validate, strict, offline) or
the vendored prometheus-operator CRD schemas; and what the issue found broken holds: Pod
Security "restricted", requests and limits, the image tagged with the release, no token
mounted, a ServiceMonitor that scrapes as shipped with the `release` label, a PVC for SQLite and
the store URL from a Secret for PostgreSQL."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest

from sidewatch.config import Config, is_loopback, split_listen
from sidewatch.config_schema import load_config
from sidewatch.daemon.listen import check_listen
from tests.deploy.kustomize import Obj, render

ROOT = Path(__file__).resolve().parents[2]
KUBE = ROOT / "deploy" / "kubernetes"
SCHEMAS = Path(__file__).with_name("schemas")
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
# The oldest Kubernetes still supported upstream when 0.1.0 was cut, and the newest the
# validator knows: a field either lacks fails.
KUBERNETES = ("1.32.0", kubernetes_validate.latest_version())
KUSTOMIZATIONS = {
    "base": KUBE / "base",
    "sqlite": KUBE / "overlays" / "sqlite",
    "postgres": KUBE / "overlays" / "postgres",
    "default": KUBE,
}
OVERLAYS = ("sqlite", "postgres", "default")
CRDS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "servicemonitor-monitoring-v1.json",
    ("monitoring.coreos.com/v1", "PrometheusRule"): "prometheusrule-monitoring-v1.json",
}


def _closed(schema: Any) -> Any:
    """A CRD's structural schema with unknown fields refused (the API server would prune them
    silently: a misspelt `bearerTokenSecret` would scrape without a token)."""
    if isinstance(schema, dict):
        out = {k: _closed(v) for k, v in schema.items()}
        preserve = schema.get("x-kubernetes-preserve-unknown-fields")
        if "properties" in schema and "additionalProperties" not in schema and not preserve:
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_closed(v) for v in schema]
    return schema


def _crd_schema(name: str) -> dict[str, Any]:
    schema = _closed(json.loads((SCHEMAS / name).read_text()))
    schema["properties"]["metadata"] = {"type": "object"}  # ObjectMeta: checked by the server
    return schema  # type: ignore[no-any-return]


@pytest.fixture(scope="module", params=list(KUSTOMIZATIONS))
def rendered(request: pytest.FixtureRequest) -> tuple[str, list[Obj]]:
    return request.param, render(KUSTOMIZATIONS[request.param])


def _one(objects: list[Obj], kind: str) -> Obj:
    (found,) = [o for o in objects if o["kind"] == kind]
    return found


def _pods(objects: list[Obj]) -> Iterator[Obj]:
    for obj in objects:
        if obj["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
            yield obj["spec"]["template"]["spec"]


def test_every_object_is_valid_against_its_schema(rendered: tuple[str, list[Obj]]) -> None:
    _, objects = rendered
    problems = []
    for obj in objects:
        crd = CRDS.get((obj["apiVersion"], obj["kind"]))
        if crd is not None:
            errors = jsonschema.Draft7Validator(_crd_schema(crd)).iter_errors(obj)
            problems += [f"{obj['kind']}: {e.json_path}: {e.message}" for e in errors]
            continue
        for version in KUBERNETES:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as e:
                problems.append(f"{obj['kind']} (Kubernetes {version}): {e.message}")

    assert [] == problems


def test_the_kinds_rendered(rendered: tuple[str, list[Obj]]) -> None:
    name, objects = rendered
    kinds = sorted(o["kind"] for o in objects)
    extra = {"sqlite": ["PersistentVolumeClaim"], "default": ["PersistentVolumeClaim"]}
    extra["postgres"] = ["PodDisruptionBudget"]
    expected = ["Deployment", "PrometheusRule", "Service", "ServiceAccount", "ServiceMonitor"]

    assert sorted(expected + extra.get(name, [])) == kinds


def test_pods_meet_pod_security_restricted(rendered: tuple[str, list[Obj]]) -> None:
    _, objects = rendered
    for pod in _pods(objects):
        security = pod.get("securityContext", {})
        assert pod.get("automountServiceAccountToken") is False
        assert not any(pod.get(k) for k in ("hostNetwork", "hostPID", "hostIPC"))
        assert security.get("seccompProfile", {}).get("type") == "RuntimeDefault"
        assert security.get("runAsUser", 1) != 0
        for container in pod["containers"]:
            own = container.get("securityContext", {})
            assert own.get("runAsNonRoot", security.get("runAsNonRoot")) is True
            assert own.get("allowPrivilegeEscalation") is False
            assert own.get("capabilities", {}).get("drop") == ["ALL"]
            assert not own.get("capabilities", {}).get("add")
            assert own.get("readOnlyRootFilesystem") is True
            assert own.get("seccompProfile", security.get("seccompProfile")) == {
                "type": "RuntimeDefault"
            }
    service_account = _one(objects, "ServiceAccount")
    assert service_account.get("automountServiceAccountToken") is False


def test_every_container_has_requests_and_limits_and_the_release_image(
    rendered: tuple[str, list[Obj]],
) -> None:
    _, objects = rendered
    for pod in _pods(objects):
        for container in pod["containers"]:
            resources = container.get("resources", {})
            for bound in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(resources.get(bound, {})), bound
            name, _, tag = container["image"].rpartition(":")
            assert (name.endswith("sidewatch"), tag) == (True, VERSION)


def _env(container: Obj) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def _config(container: Obj) -> Config:
    """The config the container's environment gives, a Secret's value made up."""
    env = {
        k: v if isinstance(v, str) else "a-secret-from-the-cluster"
        for k, v in _env(container).items()
    }
    return load_config(None, env)


def test_the_daemon_starts_from_its_environment_and_its_writable_paths_are_volumes(
    rendered: tuple[str, list[Obj]],
) -> None:
    _, objects = rendered
    for pod in _pods(objects):
        container = pod["containers"][0]
        cfg = _config(container)
        check_listen(cfg)  # the refusals `serve` makes before anything starts
        mounts = {m["mountPath"] for m in container.get("volumeMounts", [])}
        assert "/tmp" in mounts
        assert "/var/lib/sidewatch" in mounts  # the image's WORKDIR: reports, the hash key
        if cfg.db_url.startswith("sqlite:"):
            assert str(Path(cfg.db_url.removeprefix("sqlite:///")).parent) in mounts
        assert container.get("args", [])[:1] == ["serve"]
        assert "--config" not in container.get("args", [])


def test_probes_and_the_grace_period_fit_the_daemon(rendered: tuple[str, list[Obj]]) -> None:
    _, objects = rendered
    for pod in _pods(objects):
        container = pod["containers"][0]
        port = container["ports"][0]["name"]
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port}
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port}
        # Above the daemon's shutdown bound, so Kubernetes never kills it mid-drain.
        assert pod["terminationGracePeriodSeconds"] > Config().shutdown_timeout_ms // 1000


def test_the_service_monitor_scrapes_as_shipped(rendered: tuple[str, list[Obj]]) -> None:
    """It selects the Service, which selects the pods, on the port the daemon listens on, with
    the scheme it serves and, where /metrics is protected, the read token the daemon reads."""
    _, objects = rendered
    deployment, service = _one(objects, "Deployment"), _one(objects, "Service")
    monitor = _one(objects, "ServiceMonitor")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    cfg = _config(container)
    (endpoint,) = monitor["spec"]["endpoints"]

    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert endpoint["path"] == "/metrics"
    assert endpoint.get("scheme", "http") == ("https" if cfg.tls_cert_file else "http")
    assert not is_loopback(split_listen(cfg.listen)[0])
    if cfg.metrics_protected:
        read = _env(container)["SIDEWATCH_READ_TOKEN"]["secretKeyRef"]
        sent = endpoint.get("authorization", {}).get("credentials") or endpoint.get(
            "bearerTokenSecret"
        )
        assert sent == read, "the scrape must send the read token the daemon reads"


@pytest.mark.parametrize("name", OVERLAYS)
def test_the_overlays_set_the_release_label_kube_prometheus_stack_selects_on(name: str) -> None:
    objects = render(KUSTOMIZATIONS[name])

    for kind in ("ServiceMonitor", "PrometheusRule"):
        assert _one(objects, kind)["metadata"]["labels"].get("release"), kind


def test_the_sqlite_overlay_is_one_replica_on_a_claim_recreated_never_rolled() -> None:
    objects = render(KUSTOMIZATIONS["sqlite"])
    deployment = _one(objects, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    claim = _one(objects, "PersistentVolumeClaim")
    volumes = {v["name"]: v for v in pod["volumes"]}
    store = Path(_config(pod["containers"][0]).db_url.removeprefix("sqlite:///")).parent
    (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if m["mountPath"] == str(store)]

    assert 1 == deployment["spec"]["replicas"]
    assert {"type": "Recreate"} == deployment["spec"]["strategy"]
    assert claim["metadata"]["name"] == volumes[mount["name"]]["persistentVolumeClaim"]["claimName"]


def test_the_postgres_overlay_runs_replicas_with_the_url_from_a_secret() -> None:
    objects = render(KUSTOMIZATIONS["postgres"])
    deployment = _one(objects, "Deployment")
    env = _env(deployment["spec"]["template"]["spec"]["containers"][0])

    assert deployment["spec"]["replicas"] > 1
    assert {"secretKeyRef": {"name": "sidewatch-store", "key": "url"}} == env["SIDEWATCH_DB_URL"]
    assert "PersistentVolumeClaim" not in {o["kind"] for o in objects}


def test_the_renderer_refuses_what_it_does_not_implement(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text("resources: []\nnamePrefix: x-\n")

    with pytest.raises(ValueError, match="namePrefix"):
        render(tmp_path)
