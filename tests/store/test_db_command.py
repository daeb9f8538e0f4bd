"""`sidewatch db upgrade` on SQLite and PostgreSQL."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

import sidewatch.store
from sidewatch.cli.main import cli

VERSIONS = Path(sidewatch.store.__file__).with_name("migrations") / "versions"
# The revision no other revision follows (ids are not always their file name's prefix).
_CHAIN = {
    re.search(r'^revision = "([^"]+)"', text, re.M)[1]: re.search(  # type: ignore[index]
        r'^down_revision = "?([^"\n]+)"?', text, re.M
    )[1]  # type: ignore[index]
    for text in (p.read_text() for p in VERSIONS.glob("0*.py"))
}
HEAD = next(r for r in _CHAIN if r not in _CHAIN.values())


def test_db_upgrade_migrates_an_empty_store_once(blank_db_url: str) -> None:
    runner = CliRunner()

    first = runner.invoke(cli, ["db", "upgrade", "--db", blank_db_url])
    second = runner.invoke(cli, ["db", "upgrade", "--db", blank_db_url])

    assert (0, 0) == (first.exit_code, second.exit_code)
    assert f"upgraded from empty to {HEAD} (newest: {HEAD})" in first.output
    assert f"already at {HEAD} (newest: {HEAD})" in second.output


def test_db_upgrade_of_an_unreachable_store_is_a_one_line_error() -> None:
    result = CliRunner().invoke(
        cli,
        ["db", "upgrade", "--db", "postgresql+psycopg://nobody@127.0.0.1:1/x?connect_timeout=2"],
    )

    assert 1 == result.exit_code
    assert result.output.startswith("sidewatch: error: store ")
    assert 1 == len(result.output.strip().splitlines())
