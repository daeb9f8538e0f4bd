"""The README's shell blocks run as written, on a fresh store, in a fresh directory holding
what a clone holds. A block that starts the daemon or needs it is marked in the README
(`<!-- readme-test: skip (why) -->` on the line before it) and left out here."""

from __future__ import annotations

import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SKIP = "<!-- readme-test: skip"


def shell_blocks() -> list[tuple[int, str]]:
    """(line number, text) of every ```sh block not marked to skip."""
    text = (ROOT / "README.md").read_text()
    out = []
    for m in re.finditer(r"```sh\n(.*?)\n```", text, re.S):
        line = text.count("\n", 0, m.start()) + 1
        previous = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        if not previous.startswith(SKIP):
            out.append((line, m.group(1)))
    return out


BLOCKS = shell_blocks()


def test_the_readme_has_runnable_blocks_and_marks_every_other() -> None:
    text = (ROOT / "README.md").read_text()

    assert BLOCKS
    assert text.count("```sh\n") == len(BLOCKS) + text.count(SKIP)


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with a clone's files and `.venv/bin/sidewatch` running this checkout."""
    home = tmp_path_factory.mktemp("clone")
    for name in ("examples", "config.example.yaml"):
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, home / name)
        else:
            shutil.copy(source, home / name)
    command = home / ".venv" / "bin" / "sidewatch"
    command.parent.mkdir(parents=True)
    command.write_text(f'#!/bin/sh\nPYTHONPATH={ROOT} exec {sys.executable} -m sidewatch "$@"\n')
    command.chmod(command.stat().st_mode | stat.S_IXUSR)
    return home


@pytest.mark.parametrize(("line", "block"), BLOCKS, ids=[f"README.md:{n}" for n, _ in BLOCKS])
def test_a_readme_block_runs_as_written(clone: Path, line: int, block: str) -> None:
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block],
        cwd=clone,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )

    assert 0 == done.returncode, f"README.md:{line}:\n{block}\n{done.stdout}\n{done.stderr}"
