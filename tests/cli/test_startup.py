"""What a command loads: `--help` and `check-config` start without the store, the interpreter
or the daemon (their imports are most of a second; the figures are in bench/startup.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("sqlalchemy", "alembic", "sqlmodel", "ag_ui", "uvicorn", "starlette", "opentelemetry")

# Runs the command in a fresh interpreter, then lists the heavy top-level packages it loaded.
PROBE = """
import sys
from sidewatch.cli.main import cli
try:
    cli(sys.argv[1:], prog_name="sidewatch")
except SystemExit:
    pass
loaded = {name.split(".")[0] for name in sys.modules}
print("loaded:", *sorted(loaded & set(HEAVY)), file=sys.stderr)
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
    assert last.startswith("loaded:"), done.stderr  # the command itself failed
    return last.split()[1:]


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


@pytest.mark.parametrize("args", [("--help",), ("audit", "--help")], ids=["help", "audit-help"])
def test_help_does_not_load_pydantic(args: tuple[str, ...]) -> None:
    """pydantic (the config file's models) is loaded only where a file is parsed."""
    loaded = heavy_imports(*args, heavy=("pydantic", "pydantic_core"))

    assert [] == loaded
