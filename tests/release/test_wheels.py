"""The release as an adopter meets it: both distributions build (sdist and wheel) and pass
`twine check`; the `sidewatch` wheel installed alone into a fresh virtual environment (not
editable, run from a folder outside the checkout) answers `--version`, runs `demo`, serves
until `/readyz` answers, and ingests an SSE file; and after the `sidewatch-tap` wheel is
installed beside it and uninstalled again, it still ingests that file (both wheels once shipped
`sidewatch/tap/*`: uninstalling the tap broke ingest). docs/internals/distributions.md.

Speed: the wheels build without build isolation (setuptools from the test extra), the fresh
environment gets no pip of its own (this environment's pip installs into it) and installs the
daemon's dependencies from a wheelhouse in .tools/, made once from the configured package index
and made again when the wheel's dependencies change (their hash is its stamp)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.deploy.test_container import _instructions
from tests.ports import free_port
from tests.rules.test_rules import promtool as _promtool

ROOT = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
WHEELHOUSE = ROOT / ".tools" / "wheelhouse-release"
# What each distribution's build reads (the Containerfile's build stage copies the same).
SOURCES = {
    "sidewatch": ["pyproject.toml", "README.md", "LICENSE", "sidewatch"],
    "tap": ["tap"],
}
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "*.db*")
# Not this checkout, not a user's site-packages: only what the wheel brought.
CLEAN_ENV = {
    k: v
    for k, v in os.environ.items()
    if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV") and not k.startswith("SIDEWATCH_")
}


def _run(*args: str | Path, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=CLEAN_ENV,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _ok(*args: str | Path, cwd: Path, timeout: float = 300) -> str:
    done = _run(*args, cwd=cwd, timeout=timeout)
    assert done.returncode == 0, f"{args}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sdist and wheel of both distributions, built from copies of their sources."""
    work = tmp_path_factory.mktemp("build")
    out = work / "dist"
    for name, paths in SOURCES.items():
        source = work / name
        for path in paths:
            if (ROOT / path).is_dir():
                shutil.copytree(ROOT / path, source / path, ignore=IGNORE)
            else:
                source.mkdir(exist_ok=True)
                shutil.copy(ROOT / path, source / path)
        project = source / "tap" if name == "tap" else source
        done = _run(
            sys.executable, "-m", "build", "--no-isolation", "--outdir", out, project, cwd=work
        )
        assert done.returncode == 0, done.stdout + done.stderr
        warned = [
            line
            for line in (done.stdout + done.stderr).splitlines()
            if "Warning" in line or "deprecat" in line.lower()
        ]
        assert [] == warned, f"setuptools warns building {name}"
    return out


def _dependencies(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        metadata = z.read(f"sidewatch-{VERSION}.dist-info/METADATA").decode()
    return sorted(line for line in metadata.splitlines() if line.startswith("Requires-Dist:"))


def _wheelhouse(wheel: Path) -> Path:
    """The daemon's dependencies as wheels, made once per set of dependencies."""
    stamp = hashlib.sha256("\n".join(_dependencies(wheel)).encode()).hexdigest()
    if (WHEELHOUSE / ".stamp").is_file() and (WHEELHOUSE / ".stamp").read_text() == stamp:
        return WHEELHOUSE
    shutil.rmtree(WHEELHOUSE, ignore_errors=True)
    WHEELHOUSE.mkdir(parents=True)
    _ok(sys.executable, "-m", "pip", "wheel", "-q", "-w", WHEELHOUSE, wheel, cwd=WHEELHOUSE)
    (WHEELHOUSE / f"sidewatch-{VERSION}-py3-none-any.whl").unlink()  # the wheel under test
    (WHEELHOUSE / ".stamp").write_text(stamp)
    return WHEELHOUSE


@pytest.fixture(scope="module")
def venv(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the sidewatch wheel installed, alone."""
    wheel = dist / f"sidewatch-{VERSION}-py3-none-any.whl"
    house = _wheelhouse(wheel)
    env = tmp_path_factory.mktemp("adopter") / "venv"
    _ok(sys.executable, "-m", "venv", "--without-pip", env, cwd=env.parent)
    _pip(env, "install", "--no-index", "--find-links", house, wheel)  # compiled: 8 runs read it
    return env


def _pip(env: Path, *args: str | Path) -> str:
    return _ok(sys.executable, "-m", "pip", "--python", env / "bin" / "python", *args, cwd=env)


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """A working folder outside the checkout: nothing of it is importable from there."""
    assert not tmp_path.resolve().is_relative_to(ROOT)
    return tmp_path


def test_both_distributions_pass_twine_check(dist: Path) -> None:
    built = sorted(p.name for p in dist.iterdir())

    out = _ok(sys.executable, "-m", "twine", "check", "--strict", *dist.iterdir(), cwd=dist)

    assert [
        f"sidewatch-{VERSION}-py3-none-any.whl",
        f"sidewatch-{VERSION}.tar.gz",
        f"sidewatch_tap-{VERSION}-py3-none-any.whl",
        f"sidewatch_tap-{VERSION}.tar.gz",
    ] == built
    assert 4 == out.count("PASSED")


def test_the_two_wheels_share_no_file_and_no_import_package(dist: Path) -> None:
    def files(wheel: str) -> set[str]:
        with zipfile.ZipFile(dist / wheel) as z:
            return {n for n in z.namelist() if ".dist-info/" not in n}

    daemon = files(f"sidewatch-{VERSION}-py3-none-any.whl")
    tap = files(f"sidewatch_tap-{VERSION}-py3-none-any.whl")

    assert set() == daemon & tap
    assert {"sidewatch"} == {n.split("/")[0] for n in daemon}
    assert {"sidewatch_tap"} == {n.split("/")[0] for n in tap}


def test_both_wheels_carry_the_license_and_its_metadata(dist: Path) -> None:
    for wheel, name in ((f"sidewatch-{VERSION}", "sidewatch"), (f"sidewatch_tap-{VERSION}", "")):
        with zipfile.ZipFile(dist / f"{wheel}-py3-none-any.whl") as z:
            info = f"{wheel}.dist-info"
            metadata = z.read(f"{info}/METADATA").decode()
            license_text = z.read(f"{info}/licenses/LICENSE")
        assert "License-Expression: Apache-2.0" in metadata.splitlines(), name
        assert (ROOT / "LICENSE").read_bytes() == license_text
        assert "Project-URL: Source, " in metadata
        assert "Classifier: Programming Language :: Python :: 3.11" in metadata


def test_the_version(venv: Path, elsewhere: Path) -> None:
    out = _ok(venv / "bin" / "sidewatch", "--version", cwd=elsewhere)

    assert f"sidewatch, version {VERSION}\n" == out


def test_it_runs_from_the_installed_wheel_not_the_checkout(venv: Path, elsewhere: Path) -> None:
    code = "import sidewatch, sys; print(sidewatch.__file__); print(*sys.path, sep='\\n')"

    where, *path = _ok(venv / "bin" / "python", "-c", code, cwd=elsewhere).splitlines()

    assert Path(where).is_relative_to(venv)
    assert [] == [p for p in path if p and Path(p).resolve().is_relative_to(ROOT)]


def test_the_demo(venv: Path, elsewhere: Path) -> None:
    out = _ok(venv / "bin" / "sidewatch", "demo", cwd=elsewhere)

    assert out.startswith("Audit at 2026-07-26T16:30:00Z: 6 wait(s), 5 open\n")
    assert "STUCK_AFTER_DECISION" in out


@pytest.fixture
def serving(venv: Path, elsewhere: Path) -> Iterator[str]:
    """`sidewatch serve` of the wheel, on a port of its own; its listen address."""
    listen = f"127.0.0.1:{free_port()}"
    with (elsewhere / "serve.log").open("w") as log:
        daemon = subprocess.Popen(
            [str(venv / "bin" / "sidewatch"), "serve", "--listen", listen],
            cwd=elsewhere,
            env=CLEAN_ENV,
            stdout=log,
            stderr=log,
        )
        try:
            yield listen
        finally:
            daemon.terminate()
            daemon.wait(timeout=30)


def test_serve_until_readyz_answers(venv: Path, elsewhere: Path, serving: str) -> None:
    deadline = time.monotonic() + 60
    status = None
    while status != 200 and time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://{serving}/readyz", timeout=2) as r:
                status = r.status
        except OSError:
            time.sleep(0.2)
    health = _ok(venv / "bin" / "sidewatch", "health", "--listen", serving, cwd=elsewhere)

    assert 200 == status, (elsewhere / "serve.log").read_text()
    assert f"sidewatch: healthy: http://{serving}/readyz: 200\n" == health


def _container(folder: Path, port: int) -> tuple[dict[str, str], list[str], list[str]]:
    """deploy/Containerfile's environment (its folder `folder`, its port `port`: this machine
    may run a daemon on 9477), its command and its health check's command."""
    instructions = _instructions((ROOT / "deploy" / "Containerfile").read_text())
    env: dict[str, str] = {}
    for word, args in instructions:
        if word == "ENV":
            for pair in args.split():
                key, _, value = pair.partition("=")
                env[key] = value
    env = {
        k: v.replace("/var/lib/sidewatch", str(folder)).replace(":9477", f":{port}")
        for k, v in env.items()
    }
    (entrypoint,) = [json.loads(a) for w, a in instructions if w == "ENTRYPOINT"]
    (command,) = [json.loads(a) for w, a in instructions if w == "CMD"]
    (health,) = [a for w, a in instructions if w == "HEALTHCHECK"]
    return env, entrypoint + command, json.loads(health[health.index("CMD ") + 4 :])


def test_the_containers_environment_alone_serves_and_passes_its_health_check(
    venv: Path, elsewhere: Path
) -> None:
    """What the image runs, from the installed wheel: its ENV, the tokens and the plaintext
    setting docs/operating/kubernetes.md asks for, its ENTRYPOINT and CMD, then its
    HEALTHCHECK's command."""
    port = free_port()
    env, serve, health = _container(elsewhere, port)
    env = {
        **CLEAN_ENV,
        **env,
        "PATH": f"{venv / 'bin'}{os.pathsep}{CLEAN_ENV.get('PATH', '')}",
        "SIDEWATCH_INGEST_TOKEN": "ingest-token-0123456789",
        "SIDEWATCH_READ_TOKEN": "read-token-0123456789",
        "SIDEWATCH_ALLOW_PLAINTEXT": "true",
    }
    checks = []
    with (elsewhere / "serve.log").open("w") as log:
        daemon = subprocess.Popen(serve, cwd=elsewhere, env=env, stdout=log, stderr=log)
        try:
            deadline = time.monotonic() + 60
            while not checks or (checks[-1].returncode and time.monotonic() < deadline):
                time.sleep(0.3)
                checks.append(
                    subprocess.run(
                        health, cwd=elsewhere, env=env, capture_output=True, text=True, check=False
                    )
                )
        finally:
            daemon.terminate()
            daemon.wait(timeout=30)

    assert ["sidewatch", "serve"] == serve
    assert f"sidewatch: healthy: http://127.0.0.1:{port}/readyz: 200\n" == checks[-1].stdout, (
        elsewhere / "serve.log"
    ).read_text()
    assert (elsewhere / "sidewatch.db").is_file()  # the store on the image's volume


def _sse_file(folder: Path) -> Path:
    """examples/traffic.ndjson as the SSE stream an AG-UI endpoint sends (CRLF, as
    sse-starlette writes it)."""
    lines = (ROOT / "examples" / "traffic.ndjson").read_text().splitlines()
    sse = folder / "traffic.sse"
    sse.write_text("".join(f"event: x\r\ndata: {line}\r\n\r\n" for line in lines if line.strip()))
    return sse


def _ingest(venv: Path, folder: Path, sse: Path) -> str:
    return _ok(
        venv / "bin" / "sidewatch", "ingest", "--db", f"sqlite:///{folder}/s.db", sse, cwd=folder
    )


def test_ingest_of_an_sse_file_before_and_after_the_tap_came_and_went(
    venv: Path, dist: Path, elsewhere: Path
) -> None:
    sse = _sse_file(elsewhere)
    alone = _ingest(venv, elsewhere, sse)
    _pip(
        venv,
        "install",
        "--no-compile",
        "--no-index",
        dist / f"sidewatch_tap-{VERSION}-py3-none-any.whl",
    )
    both = _ok(
        venv / "bin" / "python", "-c", "import sidewatch_tap, sidewatch.ingest.sse", cwd=elsewhere
    )
    _pip(venv, "uninstall", "-y", "sidewatch-tap")
    after = _ingest(venv, elsewhere, sse)
    audit = _ok(
        venv / "bin" / "sidewatch",
        "audit",
        "--db",
        f"sqlite:///{elsewhere}/s.db",
        "--at",
        "2026-07-26T16:30:00Z",
        cwd=elsewhere,
    )

    assert f"{sse}: 50 accepted, 18 skipped, 0 rejected\n" == alone
    assert "" == both
    assert alone == after
    assert audit.startswith("Audit at 2026-07-26T16:30:00Z: 6 wait(s)")


# --- Operator assets: `sidewatch rules` and `sidewatch dashboard` (issue 35) -----------------


def test_the_wheel_writes_rules_promtool_accepts_and_a_dashboard(
    venv: Path, elsewhere: Path
) -> None:
    """From the installed wheel alone (its package data, no checkout): the rules for another job
    with absolute links, checked by a real promtool, and the dashboard as JSON."""
    promtool = _promtool()
    rules = _ok(
        venv / "bin" / "sidewatch",
        "rules",
        "--selector",
        'job="agents"',
        "--external-url",
        "https://sidewatch.example",
        cwd=elsewhere,
    )
    checked = subprocess.run(
        [promtool, "check", "rules", "/dev/stdin"],
        input=rules,
        capture_output=True,
        text=True,
        check=False,
    )
    dashboard = json.loads(_ok(venv / "bin" / "sidewatch", "dashboard", cwd=elsewhere))

    assert 0 == checked.returncode, checked.stdout + checked.stderr
    assert "SUCCESS" in checked.stdout
    assert 'up{job="agents"}' in rules
    assert 'job="sidewatch"' not in rules
    assert "runbook_url: 'https://sidewatch.example/runbooks/" in rules
    assert "sidewatch" in dashboard["title"].lower()
    assert dashboard["panels"]
