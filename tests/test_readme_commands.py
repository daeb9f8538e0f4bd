"""The README's shell blocks run as written, on a fresh store, in a fresh directory holding
what a clone holds. A block that starts the daemon or needs it is marked in the README
(`<!-- readme-test: skip (why) -->` on the line before it) and left out here. The docs' shell
blocks marked `<!-- readme-test: run -->` run the same way; the others there are examples
(a server's paths, a docker command) that are not run. The README stays short (a newcomer
reads it whole) and names only make targets that exist."""

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
RUN = "<!-- readme-test: run -->"
DOCS = sorted((ROOT / "docs").rglob("*.md"))


def shell_blocks(path: Path, runnable: bool) -> list[tuple[str, str]]:
    """("file:line", text) of every ```sh block of `path` that runs: in the README every one
    not marked to skip, in the docs every one marked to run."""
    text = path.read_text()
    out = []
    for m in re.finditer(r"```sh\n(.*?)\n```", text, re.S):
        line = text.count("\n", 0, m.start()) + 1
        previous = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        if (previous == RUN) if runnable else not previous.startswith(SKIP):
            out.append((f"{path.relative_to(ROOT)}:{line}", m.group(1)))
    return out


BLOCKS = shell_blocks(ROOT / "README.md", False) + [
    block for page in DOCS for block in shell_blocks(page, True)
]


def test_the_readme_has_runnable_blocks_and_marks_every_other() -> None:
    text = (ROOT / "README.md").read_text()

    assert shell_blocks(ROOT / "README.md", False)
    assert text.count("```sh\n") == len(shell_blocks(ROOT / "README.md", False)) + text.count(SKIP)


def test_the_docs_have_runnable_blocks_and_each_mark_is_on_a_shell_block() -> None:
    marks = sum(page.read_text().count(RUN + "\n") for page in DOCS)
    marked = [b for page in DOCS for b in shell_blocks(page, True)]

    assert marked
    assert marks == len(marked)


def test_the_readme_is_read_in_ten_minutes() -> None:
    assert (ROOT / "README.md").stat().st_size <= 16 * 1024


def test_every_make_target_the_readme_and_the_docs_name_exists() -> None:
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][a-z-]*):", makefile, re.M))
    named = {
        (path.name, target)
        for path in [ROOT / "README.md", *DOCS]
        for target in re.findall(r"`make ([a-z][a-z-]*)", path.read_text())
    }

    assert {"run", "demo", "test", "ui-screenshots", "docs"} <= {t for _, t in named}
    assert [] == sorted((page, t) for page, t in named if t not in targets)


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


@pytest.mark.parametrize(("line", "block"), BLOCKS, ids=[n for n, _ in BLOCKS])
def test_a_readme_block_runs_as_written(clone: Path, line: str, block: str) -> None:
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block],
        cwd=clone,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )

    assert 0 == done.returncode, f"{line}:\n{block}\n{done.stdout}\n{done.stderr}"
