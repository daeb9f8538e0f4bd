"""The runbooks the alerts link to are package data: the wheel holds every one of them, and a
daemon installed from it serves them at `/runbooks/{name}` from its own installed copy, with
no source tree anywhere near it."""

from __future__ import annotations

import html
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNBOOKS = sorted(p.name for p in (ROOT / "sidewatch" / "daemon" / "runbooks").glob("*.md"))

# Runs in the installed copy only: a daemon on a throw-away store, asked for every runbook.
SERVE = """
import dataclasses, json, sys
from starlette.testclient import TestClient
import sidewatch
from sidewatch.config import Config
from sidewatch.daemon import ui
from sidewatch.daemon.serve import Daemon

config = dataclasses.replace(
    Config(), db_url=f"sqlite:///{sys.argv[1]}", allowed_hosts=("testserver",)
)
client = TestClient(Daemon(config).app)
pages = {name: client.get(f"/runbooks/{name}") for name in sys.argv[2:]}
print(json.dumps({
    "package": sidewatch.__file__,
    "runbooks": str(ui.RUNBOOKS),
    "status": {name: r.status_code for name, r in pages.items()},
    "text": {name: r.text for name, r in pages.items()},
}))
"""


def test_the_wheel_holds_the_runbooks_and_an_installed_daemon_serves_them(
    tmp_path: Path,
) -> None:
    source = tmp_path / "src"  # a copy: pip would leave build files in the source tree
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "sidewatch",
        source / "sidewatch",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # not this source tree
    pip = [sys.executable, "-m", "pip"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(source)],
        check=True,
        capture_output=True,
        env=env,
        timeout=600,
    )
    (wheel,) = (tmp_path / "dist").glob("sidewatch-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        packaged = sorted(
            Path(n).name for n in zf.namelist() if n.startswith("sidewatch/daemon/runbooks/")
        )
    site = tmp_path / "site"
    subprocess.run(
        [*pip, "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
        env=env,
        timeout=600,
    )
    done = subprocess.run(
        [sys.executable, "-c", SERVE, str(tmp_path / "sw.db"), *RUNBOOKS],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(site)},
        check=False,
        timeout=300,
    )
    assert 0 == done.returncode, done.stderr
    served = json.loads(done.stdout.strip().splitlines()[-1])
    first_lines = {
        name: (ROOT / "sidewatch" / "daemon" / "runbooks" / name).read_text().splitlines()[0]
        for name in RUNBOOKS
    }

    assert 8 <= len(RUNBOOKS)
    assert RUNBOOKS == packaged
    assert Path(served["package"]).is_relative_to(site)
    assert Path(served["runbooks"]).is_relative_to(site)
    assert dict.fromkeys(RUNBOOKS, 200) == served["status"]
    assert all(first_lines[n] in html.unescape(served["text"][n]) for n in RUNBOOKS)
