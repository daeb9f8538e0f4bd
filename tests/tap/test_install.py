"""The tap installs into an agent's environment alone: `pip install ./tap` in a fresh venv
brings `sidewatch_tap` and none of the daemon's dependencies, and the tap works there."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SMOKE = """
import importlib.util, sidewatch_tap
from sidewatch_tap import Evidence, Tap, TapMiddleware, tap_events
daemon_deps = ["sqlalchemy", "sqlmodel", "alembic", "uvicorn", "starlette", "opentelemetry",
               "apscheduler", "prometheus_client", "orjson", "pydantic", "yaml", "click"]
print(sorted(m for m in daemon_deps if importlib.util.find_spec(m)))
print(importlib.util.find_spec("sidewatch") is None)
print("site-packages" in sidewatch_tap.__file__)
tap = Tap("http://127.0.0.1:9/v1/events", retry_base_seconds=0.01)
tap.record({"type": "RUN_STARTED", "threadId": "t", "runId": "r"}, None, None)
tap.close(timeout=0.5)
print(tap.sent + tap.dropped)
evidence = Evidence("http://127.0.0.1:9/v1/events", retry_base_seconds=0.01)
evidence.route(thread_id="t", interrupt_id="i", delivered=False, error="bounced")
evidence.close(timeout=0.5)
print(evidence.tap.sent + evidence.tap.dropped)
"""


def test_the_tap_distribution_installs_without_the_daemons_dependencies(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # not this source tree
    source = tmp_path / "src"  # a copy: pip builds in the source tree, which stays clean
    shutil.copytree(ROOT / "tap", source, ignore=shutil.ignore_patterns("__pycache__", "build"))
    venv = tmp_path / "agent"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", str(source)],
        check=True,
        capture_output=True,
        env=env,
    )
    out = subprocess.run(
        [str(python), "-c", SMOKE],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    ).stdout.split()
    listed = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=freeze"],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout

    assert ["[]", "True", "True", "1", "1"] == out
    assert {"sidewatch-tap", "pip", "setuptools"} >= {
        line.split("==")[0].lower() for line in listed.split()
    }
