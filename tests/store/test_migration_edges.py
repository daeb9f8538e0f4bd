"""Who may change the schema: two processes upgrading one PostgreSQL store take turns, a
read-only command never upgrades (it refuses a store that is behind), a store a newer release
migrated is refused in one line, and `serve --no-migrate` never migrates."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest
from alembic import command
from click.testing import CliRunner
from sqlalchemy import create_engine, text

from sidewatch.cli.main import cli
from sidewatch.store.db import _alembic_config, open_store, revision
from tests.conftest import PgSchemas
from tests.ports import free_port
from tests.store.test_db_command import HEAD


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


@pytest.mark.parametrize("command_args", [["audit", "--open"], ["report"]])
def test_a_read_only_command_refuses_a_store_behind_and_leaves_it_there(
    blank_db_url: str, command_args: list[str]
) -> None:
    _at(blank_db_url, "0003")

    result = CliRunner().invoke(cli, [*command_args, "--db", blank_db_url])

    assert result.exit_code == 1, result.output
    [line] = result.output.strip().splitlines()
    assert "revision 0003" in line and HEAD in line and "sidewatch db upgrade" in line
    assert _revision(blank_db_url) == "0003"


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
    _at(blank_db_url, "0005")

    done = _serve(tmp_path, blank_db_url, "--no-migrate")

    assert done.returncode == 1, done.stderr
    assert "sidewatch db upgrade" in done.stderr and "0005" in done.stderr
    assert _revision(blank_db_url) == "0005"
