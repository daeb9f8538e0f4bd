"""What a command loads: `--help` and `check-config` start without the store, the interpreter
or the daemon; `audit` and `report` on a store at the newest migration read it with SQLAlchemy
Core alone: no Alembic, no ORM or pydantic, no ag-ui (their imports are most of a second; the
figures are in bench/startup.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("sqlalchemy", "alembic", "sqlmodel", "ag_ui", "uvicorn", "starlette", "opentelemetry")
SEED = ROOT / "sidewatch" / "cli" / "seed-audit.ndjson"
# What a read of a store at the newest migration needs none of: the migrations' machinery
# (Alembic and its Mako templates), an ORM and pydantic, the AG-UI models that read input,
# the daemon, and on SQLite the PostgreSQL dialect.
NOT_FOR_A_READ = (
    "alembic",
    "mako",
    "sqlmodel",
    "sqlalchemy.orm",
    "pydantic",
    "ag_ui",
    "uvicorn",
    "starlette",
    "opentelemetry",
    "sqlalchemy.dialects.postgresql",
)

# Runs the command in a fresh interpreter, then lists the heavy top-level packages it loaded.
PROBE = """
import sys
from sidewatch.cli.main import cli
status = 0
try:
    cli(sys.argv[1:], prog_name="sidewatch")
except SystemExit as e:
    status = e.code
loaded = {
    heavy for heavy in HEAVY for name in sys.modules
    if name == heavy or name.startswith(heavy + ".")
}
print("exit", status, "loaded:", *sorted(loaded), file=sys.stderr)
"""


def heavy_imports(*args: str, heavy: tuple[str, ...] = HEAVY) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", f"HEAVY = {heavy!r}\n{PROBE}", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
        timeout=60,
    )
    last = done.stderr.strip().splitlines()[-1]
    # A command that failed (or stopped early) would load less than its work needs.
    assert last.startswith("exit 0 loaded:"), done.stderr
    return last.split()[3:]


@pytest.mark.parametrize(
    "args",
    [("--help",), ("audit", "--help"), ("check-config", "config.example.yaml")],
    ids=["help", "audit-help", "check-config"],
)
def test_a_command_that_needs_no_store_loads_none_of_the_heavy_packages(
    args: tuple[str, ...],
) -> None:
    loaded = heavy_imports(*args)

    assert [] == loaded


@pytest.mark.parametrize(
    "args",
    [("audit",), ("audit", "--format", "json"), ("report", "--format", "json")],
    ids=["audit", "audit-json", "report"],
)
def test_a_read_of_a_store_at_the_newest_migration_loads_no_migration_orm_or_input_models(
    args: tuple[str, ...], tmp_path: Path
) -> None:
    db = f"sqlite:///{tmp_path / 'demo.db'}"
    subprocess.run(
        [sys.executable, "-m", "sidewatch", "ingest", "--db", db, str(SEED)],
        check=True,
        capture_output=True,
        cwd=ROOT,
        timeout=120,
    )

    loaded = heavy_imports(*args, "--db", db, heavy=NOT_FOR_A_READ)

    assert [] == loaded


@pytest.mark.parametrize("args", [("--help",), ("audit", "--help")], ids=["help", "audit-help"])
def test_help_does_not_load_pydantic(args: tuple[str, ...]) -> None:
    """pydantic (the config file's models) is loaded only where a file is parsed."""
    loaded = heavy_imports(*args, heavy=("pydantic", "pydantic_core"))

    assert [] == loaded


# What `sidewatch ingest FILE` of plain AG-UI NDJSON into a new SQLite store needs none of:
# the migrations' machinery (the store is made from its schema at once: store.sqlite_schema), the
# input models, the tap's package, and the auditor's modules (verdicts, checkpoints, retention).
NOT_FOR_AN_INGEST = (
    *NOT_FOR_A_READ,
    "sidewatch_tap",
    "sidewatch.core.engine",
    "sidewatch.app.evaluate",
    "sidewatch.store.checkpoint",
    "sidewatch.store.suffix",
    "sidewatch.store.auditstate",
    "sidewatch.store.retention",
    "sidewatch.app.prune",
)


def test_an_ingest_into_a_new_sqlite_store_loads_no_migration_input_models_or_auditor(
    tmp_path: Path,
) -> None:
    db = f"sqlite:///{tmp_path / 'new.db'}"

    loaded = heavy_imports("ingest", "--db", db, str(SEED), heavy=NOT_FOR_AN_INGEST)

    assert [] == loaded
