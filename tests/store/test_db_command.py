"""`sidewatch db upgrade` on SQLite and PostgreSQL, and the newest revision it migrates to."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory
from click.testing import CliRunner

import sidewatch.store
from sidewatch.cli.main import cli
from sidewatch.store import db

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


# A next migration in the forms Alembic writes: its newer annotated template, and a merge
# (a tuple of the revisions it follows), which only Alembic reads.
NEXT = f"{int(HEAD[:4]) + 1:04d}"  # the head's number (a file name may follow it)
ANNOTATED = f'revision: str = "{NEXT}"\ndown_revision: Union[str, None] = "{HEAD}"\n'
MERGE = f'revision = "{NEXT}"\ndown_revision = ("{HEAD}",)\n'


@pytest.mark.parametrize("source", [ANNOTATED, MERGE], ids=["annotated", "merge"])
def test_the_newest_revision_is_alembics_head_whatever_the_form_of_the_files(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    migrations = tmp_path / "migrations"
    shutil.copytree(VERSIONS.parent, migrations, ignore=shutil.ignore_patterns("__pycache__"))
    (migrations / "versions" / f"{NEXT}_next.py").write_text(
        f'"""next"""\n\nfrom typing import Union\n\n{source}'
        "branch_labels = None\ndepends_on = None\n\n\n"
        "def upgrade() -> None:\n    pass\n\n\ndef downgrade() -> None:\n    pass\n"
    )
    monkeypatch.setattr(db, "_MIGRATIONS", migrations)
    db.head.cache_clear()
    try:
        alembic_head = ScriptDirectory.from_config(db._alembic_config()).get_current_head()
        newest = db.head()
    finally:
        db.head.cache_clear()

    assert (NEXT, NEXT) == (alembic_head, newest)


def test_the_newest_revision_read_from_the_files_is_alembics_head() -> None:
    alembic_head = ScriptDirectory.from_config(db._alembic_config()).get_current_head()

    assert (HEAD, HEAD) == (alembic_head, db.head())


def test_db_stats_prints_rows_the_oldest_row_and_the_size_of_every_table(
    db_url: str, tmp_path: Path
) -> None:
    stream = tmp_path / "one.ndjson"
    stream.write_text(
        '{"type":"RUN_STARTED","threadId":"t","runId":"r","timestamp":1785081600000}\n'
        '{"type":"RUN_FINISHED","threadId":"t","runId":"r","timestamp":1785081601000,'
        '"outcome":{"type":"interrupt","interrupts":[{"id":"i","reason":"tool_call"}]}}\n'
    )
    runner = CliRunner()
    runner.invoke(cli, ["ingest", "--db", db_url, str(stream)])

    result = runner.invoke(cli, ["db", "stats", "--db", db_url])

    assert 0 == result.exit_code, result.output
    lines = result.output.splitlines()
    assert lines[0].endswith(f"(schema {HEAD})")
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:-2]}
    assert ["1", "2026-07-26T16:00:01Z"] == rows["interrupt"]
    assert ["2", "2026-07-26T16:00:00Z"] == rows["run_fact"]
    assert ["0", "-"] == rows["answer"]
    assert {"unit", "wait_state", "pruned_total", "transition"} <= rows.keys()
    assert lines[-2].startswith("size on disk: ")
    assert "retention 30d; pruned so far (kept as counts): nothing" == lines[-1]
