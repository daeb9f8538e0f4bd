"""Who may change the schema: two processes upgrading one PostgreSQL store take turns, a
read-only command never upgrades (it refuses a store that is behind), a store a newer release
migrated is refused in one line, a store a pre-release build made is refused with what to do
instead, and `serve --no-migrate` never migrates."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from click.testing import CliRunner
from sqlalchemy import create_engine, text

from sidewatch.cli.main import cli
from sidewatch.store import db
from sidewatch.store.db import _alembic_config, open_store, revision
from tests.conftest import PgSchemas
from tests.ports import free_port
from tests.store.test_db_command import HEAD, VERSIONS


def _at(url: str, rev: str) -> None:
    """The store migrated up to `rev` only."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            cfg = _alembic_config()
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, rev)
    finally:
        engine.dispose()


def _behind(url: str) -> None:
    """The store behind the newest revision: holding tables, at none of the revisions (what
    `alembic downgrade base` leaves of a migrated store; with one revision, the only one
    behind it)."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            cfg = _alembic_config()
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
            command.downgrade(cfg, "base")
            conn.execute(text("CREATE TABLE leftover (id INTEGER)"))
    finally:
        engine.dispose()


def _revision(url: str) -> str | None:
    engine = open_store(url, migrate=False)
    try:
        return revision(engine)[0]
    finally:
        engine.dispose()


def test_processes_upgrading_one_empty_postgresql_store_together_all_succeed(
    pg_schemas: PgSchemas,
) -> None:
    for _ in range(4):  # without the lock, most rounds had one of them fail
        url = pg_schemas.url(pg_schemas.blank())
        start = threading.Barrier(3)
        errors: list[BaseException] = []

        def up(
            url: str = url, start: threading.Barrier = start, errors: list[BaseException] = errors
        ) -> None:
            start.wait()
            try:
                open_store(url).dispose()
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=up) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert errors == []
        assert _revision(url) == HEAD


@pytest.fixture
def next_revision(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """This sidewatch as the next release: one revision (changing nothing) after the head."""
    migrations = tmp_path / "migrations"
    shutil.copytree(VERSIONS.parent, migrations, ignore=shutil.ignore_patterns("__pycache__"))
    (migrations / "versions" / "0002_next.py").write_text(
        f'"""next"""\n\nrevision = "0002_next"\ndown_revision = "{HEAD}"\n'
        "branch_labels = None\ndepends_on = None\n\n\n"
        "def upgrade() -> None:\n    pass\n\n\ndef downgrade() -> None:\n    pass\n"
    )
    db.head.cache_clear()
    monkeypatch.setattr(db, "_MIGRATIONS", migrations)
    yield "0002_next"
    db.head.cache_clear()


@pytest.mark.parametrize("command_args", [["audit", "--open"], ["report"]])
def test_a_read_only_command_refuses_a_store_behind_and_leaves_it_there(
    blank_db_url: str, command_args: list[str], next_revision: str
) -> None:
    _at(blank_db_url, HEAD)

    result = CliRunner().invoke(cli, [*command_args, "--db", blank_db_url])

    assert result.exit_code == 1, result.output
    [line] = result.output.strip().splitlines()
    assert f"revision {HEAD}" in line and next_revision in line
    assert "sidewatch db upgrade" in line
    assert _revision(blank_db_url) == HEAD


def _newer(url: str) -> None:
    """The store as a newer release left it: at a revision this one does not know."""
    open_store(url).dispose()
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0099'"))
    engine.dispose()


def test_audit_refuses_a_store_a_newer_release_migrated_in_one_line(db_url: str) -> None:
    _newer(db_url)
    try:
        result = CliRunner().invoke(cli, ["audit", "--db", db_url])
    finally:
        _at_head_again(db_url)

    assert result.exit_code == 1, result.output
    [line] = result.output.strip().splitlines()
    assert "0099" in line and HEAD in line and "does not know" in line


def _at_head_again(url: str) -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text(f"UPDATE alembic_version SET version_num = '{HEAD}'"))
    engine.dispose()


def _serve(tmp_path: Path, url: str, *flags: str) -> subprocess.CompletedProcess[str]:
    """`sidewatch serve` that must refuse to start (it would otherwise serve until killed)."""
    cfg = tmp_path / "serve.yaml"
    listen = f"127.0.0.1:{free_port()}"
    cfg.write_text(f"store: {{url: '{url}'}}\nserver: {{listen: '{listen}'}}\n")
    return subprocess.run(
        [sys.executable, "-m", "sidewatch", "serve", "--config", str(cfg), *flags],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_serve_refuses_a_store_a_newer_release_migrated_in_one_line(
    tmp_path: Path, db_url: str
) -> None:
    _newer(db_url)
    try:
        done = _serve(tmp_path, db_url)
    finally:
        _at_head_again(db_url)

    assert done.returncode == 1, done.stderr
    # The daemon's JSON log lines, then the one line of the refusal
    [line] = [x for x in done.stderr.splitlines() if not x.startswith("{")]
    assert line.startswith("sidewatch: error: ") and "0099" in line and HEAD in line


def test_serve_no_migrate_refuses_a_store_behind_and_leaves_it_there(
    tmp_path: Path, blank_db_url: str
) -> None:
    _behind(blank_db_url)

    done = _serve(tmp_path, blank_db_url, "--no-migrate")

    assert done.returncode == 1, done.stderr
    assert "sidewatch db upgrade" in done.stderr and "revision (none)" in done.stderr
    assert _revision(blank_db_url) is None


def _pre_release(url: str, rev: str) -> None:
    """The store as a build before 0.1.0 left it: its schema, stamped with its own revision."""
    open_store(url).dispose()
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text(f"UPDATE alembic_version SET version_num = '{rev}'"))
    engine.dispose()


@pytest.mark.parametrize("rev", ["0001", "0023"])
def test_db_upgrade_of_a_pre_release_store_says_to_make_a_new_one_and_changes_nothing(
    blank_db_url: str, rev: str
) -> None:
    _pre_release(blank_db_url, rev)

    result = CliRunner().invoke(cli, ["db", "upgrade", "--db", blank_db_url])

    assert result.exit_code == 1, result.output
    [line] = result.output.strip().splitlines()
    assert line.startswith("sidewatch: error: store ")
    assert f"revision {rev} of a pre-release build" in line and HEAD in line
    assert "make a new store" in line and "docs/operating/upgrades.md" in line
    assert _revision(blank_db_url) == rev


def test_a_read_only_command_on_a_pre_release_store_says_to_make_a_new_one(
    blank_db_url: str,
) -> None:
    _pre_release(blank_db_url, "0023")

    result = CliRunner().invoke(cli, ["audit", "--open", "--db", blank_db_url])

    assert result.exit_code == 1, result.output
    [line] = result.output.strip().splitlines()
    assert "revision 0023 of a pre-release build" in line and "make a new store" in line
