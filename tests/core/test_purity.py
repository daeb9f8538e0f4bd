"""The core is pure: it imports nothing of sidewatch outside `core`, and no clock, file,
environment or database module; the import direction of the layers holds everywhere."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "sidewatch"
FORBIDDEN_IN_CORE = {
    "time",
    "os",
    "sys",
    "io",
    "pathlib",
    "socket",
    "sqlite3",
    "sqlalchemy",
    "sqlmodel",
    "random",
    "secrets",
    "subprocess",
    "yaml",
    "click",
}
# Which sidewatch packages each layer may import (config and errors are allowed everywhere).
ALLOWED = {
    "core": {"core"},
    "ingest": {"ingest", "core", "tap"},  # tap.sse: the SSE framing the tap ships
    "store": {"store", "core"},
    "exporters": {"exporters", "core"},
    "report": {"report", "core"},
    "daemon": {"daemon", "ingest", "store", "exporters", "report", "core"},
    "cli": {"cli", "daemon", "ingest", "store", "exporters", "report", "core"},
    "tap": {"tap"},  # runs inside the agent's process: nothing else of sidewatch
}


def _imports(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


def test_core_imports_no_io_and_no_other_layer() -> None:
    bad = [
        f"{p.name}: {name}"
        for p in (PACKAGE / "core").glob("*.py")
        for name in _imports(p)
        if name.split(".")[0] in FORBIDDEN_IN_CORE
        or (name.startswith("sidewatch.") and not name.startswith("sidewatch.core"))
    ]

    assert [] == bad


def test_core_never_reads_the_clock() -> None:
    calls = [
        f"{p.name}:{node.lineno}"
        for p in (PACKAGE / "core").glob("*.py")
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.Attribute) and node.attr in {"now", "utcnow", "today", "time"}
    ]

    assert [] == calls


def test_layers_import_only_downwards() -> None:
    bad = []
    for layer, allowed in ALLOWED.items():
        for p in (PACKAGE / layer).rglob("*.py"):
            for name in _imports(p):
                parts = name.split(".")
                if parts[0] == "sidewatch" and len(parts) > 1:
                    target = parts[1]
                    if target not in allowed and target not in {"config", "errors"}:
                        bad.append(f"{p.relative_to(PACKAGE)}: {name}")

    assert [] == bad
