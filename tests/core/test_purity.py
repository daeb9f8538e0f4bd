"""The core is pure: it imports the pure part of the standard library and itself, nothing else,
and reads no clock. Every layer imports from an allowlist: the sidewatch packages beneath it
(`cli/daemon → app → {ingest, store, exporters, report} → core`) and the libraries listed for it,
so a new dependency of a layer is a decision written here, never an accident."""

from __future__ import annotations

import ast
import itertools
import re
import shutil
import sys
from pathlib import Path

import pytest

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


def _upward(package: Path) -> list[str]:
    """Every import of a sidewatch layer its own allowlist does not name."""
    bad = []
    for layer, allowed in ALLOWED.items():
        for p in (package / layer).rglob("*.py"):
            for name in _imports(p):
                parts = name.split(".")
                if parts[0] == "sidewatch" and len(parts) > 1:
                    target = parts[1]
                    if target not in allowed and target not in SHARED:
                        bad.append(f"{p.relative_to(package)}: {name}")
    return bad


def test_layers_import_only_downwards() -> None:
    assert [] == _upward(PACKAGE)


@pytest.mark.parametrize(
    ("module", "imported"),
    [
        ("store/repo.py", "sidewatch.app.ingest"),
        ("app/ingest.py", "sidewatch.daemon.http"),
        ("core/model.py", "sidewatch.store.repo"),
        ("ingest/reader.py", "sidewatch.report.build"),
        ("app/read.py", "sidewatch.cli.main"),
    ],
    ids=["store-imports-app", "app-imports-daemon", "core-imports-store", "sideways", "cli"],
)
def test_an_import_upwards_or_sideways_is_caught(
    tmp_path: Path, module: str, imported: str
) -> None:
    package = tmp_path / "sidewatch"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    path = package / module
    path.write_text(f"{path.read_text()}\n\ndef _late() -> None:\n    import {imported}\n")

    assert [f"{module}: {imported}"] == _upward(package)


# The transports of the daemon are independent of each other: each calls the application
# layer, none reaches the use cases through another (the JetStream consumer once ingested
# through the HTTP module).
TRANSPORTS = {"http", "jetstream", "ui"}


def test_no_transport_of_the_daemon_imports_another() -> None:
    bad = [
        f"{name}.py: {imported}"
        for name in sorted(TRANSPORTS - {"http"})  # http mounts the pages' routes (ui)
        for imported in _imports(PACKAGE / "daemon" / f"{name}.py")
        if imported.removeprefix("sidewatch.daemon.") in TRANSPORTS
    ]

    assert [] == bad


# What the application layer may read of time: how long a tick took, never what time it is
# (`now` is passed in, by the scheduler, the HTTP handler or the command).
APP_CLOCKS = {"time", "time_ns", "now", "utcnow", "today", "monotonic"}


def test_the_application_layer_never_reads_the_clock() -> None:
    calls = [
        f"{p.name}:{node.lineno}"
        for p in (PACKAGE / "app").glob("*.py")
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.Attribute) and node.attr in APP_CLOCKS
    ]

    assert [] == calls


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


def test_the_readme_draws_every_layer_in_five_lines_in_the_order_allowed() -> None:
    readme = (PACKAGE.parent / "README.md").read_text()
    development = readme[readme.index("## Development") :]
    block = development[development.index("```text\n") + 8 :]
    drawing = block[: block.index("```")].splitlines()
    named = [re.findall(r"\b[a-z_]+\b", line.strip().split("  ")[0]) for line in drawing[:4]]
    rows = [set(words) & set(ALLOWED) for words in named]

    assert 5 == len(drawing)
    assert set(ALLOWED) == set().union(*rows) | {"tap"}
    for upper, lower in itertools.pairwise(rows):  # each row may use the one below
        assert all(lower <= ALLOWED[layer] for layer in upper - {"cli"})
    assert all(name in drawing[4] for name in (*SHARED, "tap"))
