"""The core is pure: it imports the pure part of the standard library and itself, nothing else,
and reads no clock. Every layer imports from an allowlist: the sidewatch packages beneath it
(`cli/daemon → app → {ingest, store, exporters, report} → core`) and the libraries listed for it,
so a new dependency of a layer is a decision written here, never an accident."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "sidewatch"
# The core's whole standard library: computation only (no clock, file, socket, process,
# environment or randomness), `urllib.parse` but not `urllib.request`.
CORE_STDLIB = {
    "__future__",
    "abc",
    "bisect",
    "collections",
    "dataclasses",
    "enum",
    "fnmatch",
    "functools",
    "hashlib",
    "itertools",
    "math",
    "operator",
    "re",
    "typing",
    "unicodedata",
    "urllib.parse",
}
# Which sidewatch packages each layer may import (config and errors are allowed everywhere).
ALLOWED = {
    "core": {"core"},
    "ingest": {"ingest", "core", "tap"},  # tap.sse: the SSE framing the tap ships
    "store": {"store", "core"},
    "exporters": {"exporters", "core"},
    "report": {"report", "core"},
    "app": {"app", "ingest", "store", "exporters", "report", "core"},
    # The shell: how sidewatch is reached (HTTP, JetStream, the scheduler) and its wiring.
    "daemon": {"daemon", "app", "ingest", "store", "exporters", "report", "core"},
    "cli": {"cli", "daemon", "app", "ingest", "store", "exporters", "report", "core"},
    "tap": {"tap"},  # runs inside the agent's process: nothing else of sidewatch
}
# Which libraries beyond the standard library each layer may import.
LIBRARIES = {
    "core": set(),
    "ingest": {"ag_ui", "orjson", "pydantic", "rfc8785"},
    "store": {"alembic", "orjson", "psycopg", "sqlalchemy", "sqlmodel"},
    "exporters": {"opentelemetry", "prometheus_client"},
    "report": set(),
    "app": {"orjson", "sqlalchemy"},
    "daemon": {
        "apscheduler",
        "jinja2",
        "markupsafe",
        "nats",
        "orjson",
        "prometheus_client",
        "sqlalchemy",
        "starlette",
        "uvicorn",
    },
    "cli": {"click", "orjson", "sqlalchemy"},
    "tap": set(),  # the agent's process gets no dependency from sidewatch
}
SHARED = {"config", "config_schema", "errors"}  # the modules beside the layers, importable anywhere


def _imports(path: Path) -> list[str]:
    """Every absolute import of a module, at its top or inside a function."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def _within(name: str, allowed: set[str]) -> bool:
    return any(name == a or name.startswith(f"{a}.") for a in allowed)


def test_core_imports_only_the_pure_standard_library_and_itself() -> None:
    bad = [
        f"{p.name}: {name}"
        for p in (PACKAGE / "core").glob("*.py")
        for name in _imports(p)
        if not _within(name, CORE_STDLIB | {"sidewatch.core"})
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
                    if target not in allowed and target not in SHARED:
                        bad.append(f"{p.relative_to(PACKAGE)}: {name}")

    assert [] == bad


def test_each_layer_imports_only_the_libraries_listed_for_it() -> None:
    bad = []
    for layer, libraries in LIBRARIES.items():
        for p in (PACKAGE / layer).rglob("*.py"):
            for name in _imports(p):
                top = name.split(".")[0]
                if top not in {*sys.stdlib_module_names, "sidewatch", *libraries}:
                    bad.append(f"{p.relative_to(PACKAGE)}: {name}")

    assert [] == bad


def test_every_package_of_sidewatch_is_a_layer_with_its_allowlists() -> None:
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}

    assert packages == set(ALLOWED) == set(LIBRARIES)
