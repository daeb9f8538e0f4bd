"""A real Prometheus for tests: the binary `make test` unpacks, started on a free port with a
generated config (1 s scrape and evaluation) that scrapes one target, queried over its HTTP API.
A missing binary fails the test that asks for it; it never skips."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

UNPACKED = Path(__file__).resolve().parents[1] / ".tools" / "prometheus" / "usr" / "bin"


def prometheus_binary() -> Path:
    """The Prometheus beside promtool (SIDEWATCH_PROMTOOL, else `.tools`); missing fails."""
    promtool = os.environ.get("SIDEWATCH_PROMTOOL")
    path = (Path(promtool).parent if promtool else UNPACKED) / "prometheus"
    if not path.is_file():
        pytest.fail(f"{path} does not exist: `make test` unpacks Prometheus beside promtool")
    return path


class RealPrometheus:
    """One Prometheus process scraping `target` (host:port) every second as the job
    `sidewatch` (with the target `labels` given), storing in `workdir`."""

    def __init__(
        self,
        workdir: Path,
        target: str,
        rule_files: list[Path] | None = None,
        labels: dict[str, str] | None = None,
    ) -> None:
        self.workdir = workdir
        self.log = workdir / "prometheus.log"
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(p.resolve()) for p in rule_files or []],
            "scrape_configs": [
                {
                    "job_name": "sidewatch",
                    "static_configs": [{"targets": [target], "labels": labels or {}}],
                }
            ],
        }
        self.config = workdir / "prometheus.yml"
        self.config.write_text(yaml.safe_dump(config))
        self.url = ""
        self._proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def from_file(cls, workdir: Path, config: Path) -> RealPrometheus:
        """One Prometheus process run from `config` as it is (its rule files relative to it)."""
        prometheus = cls.__new__(cls)
        prometheus.workdir, prometheus.log = workdir, workdir / "prometheus.log"
        prometheus.config, prometheus.url, prometheus._proc = config, "", None
        return prometheus

    def start(self, seconds: float = 20.0) -> RealPrometheus:
        """Start the process and return once `/-/ready` answers 200."""
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        self.url = f"http://127.0.0.1:{port}"
        with self.log.open("wb") as err:  # the child keeps its own descriptor
            self._proc = subprocess.Popen(
                [
                    str(prometheus_binary()),
                    f"--config.file={self.config}",
                    f"--storage.tsdb.path={self.workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                ],
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and self._proc.poll() is None:
            try:
                if httpx.get(f"{self.url}/-/ready", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        self.stop()
        raise AssertionError(f"Prometheus did not become ready:\n{self.log.read_text()}")

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it has not ended within ten seconds."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=10)

    def __enter__(self) -> RealPrometheus:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def _get(self, path: str, **params: str) -> Any:
        answer = httpx.get(f"{self.url}{path}", params=params, timeout=10).json()
        if answer.get("status") != "success":
            raise AssertionError(f"{path} {params}: {answer.get('error', answer)}")
        return answer["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector (or scalar, as one item) `expr` evaluates to now."""
        data = self._get("/api/v1/query", query=expr)
        result = data["result"]
        return list(result) if data["resultType"] in ("vector", "matrix") else [{"value": result}]

    def alerts(self) -> list[dict[str, Any]]:
        """The pending and firing alerts of the loaded rule files."""
        return list(self._get("/api/v1/alerts")["alerts"])

    def wait_for(self, expr: str, seconds: float = 15.0) -> list[dict[str, Any]]:
        """`query(expr)` once it returns a series, or its empty result after `seconds`."""
        deadline = time.monotonic() + seconds
        while not (result := self.query(expr)) and time.monotonic() < deadline:
            time.sleep(0.25)
        return result
