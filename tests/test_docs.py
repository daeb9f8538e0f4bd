"""The docs site: the reference pages checked in are the ones the code writes now (so they
cannot drift from the config model, the click group, the OpenAPI document, the collectors and
the enums), and `mkdocs build --strict` passes (a broken link or a page left out of the nav
fails it). `make docs` runs the same build in `make test`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sidewatch.cli.docsgen import GENERATED, PAGES

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "docs" / "reference"


@pytest.mark.parametrize("name", sorted(PAGES))
def test_a_generated_reference_page_is_what_the_code_writes_now(name: str) -> None:
    checked_in = (REFERENCE / name).read_text()

    assert checked_in.startswith(GENERATED)
    assert PAGES[name]() == checked_in, (
        f"docs/reference/{name} is stale: run `make reference` "
        "(python -m sidewatch.cli.docsgen docs/reference) and commit it"
    )


def test_the_check_mode_names_a_stale_page(tmp_path: Path) -> None:
    for name in PAGES:
        (tmp_path / name).write_text((REFERENCE / name).read_text())
    (tmp_path / "metrics.md").write_text("# Metrics\n")

    done = subprocess.run(
        [sys.executable, "-m", "sidewatch.cli.docsgen", "--check", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )

    assert 1 == done.returncode
    assert f"stale: {tmp_path / 'metrics.md'}:" in done.stderr


def test_every_page_is_in_the_nav_and_the_site_builds_strictly(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    )

    assert 0 == done.returncode, done.stderr
    assert (tmp_path / "reference" / "metrics" / "index.html").exists()
