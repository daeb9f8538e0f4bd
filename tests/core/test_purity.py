"""The core is pure: it imports the pure part of the standard library and itself, nothing else,
and reads no clock. Every layer imports from an allowlist: the sidewatch packages beneath it
(`cli/daemon → app → {ingest, store, exporters, report} → core`) and the libraries listed for it,
so a new dependency of a layer is a decision written here, never an accident."""

from __future__ import annotations

import ast
import importlib
import inspect
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
    "ingest": {"ingest", "core"},
    "store": {"store", "core"},
    "exporters": {"exporters", "core"},
    "report": {"report", "core"},
    "app": {"app", "ingest", "store", "exporters", "report", "core"},
    # The shell: how sidewatch is reached (HTTP, JetStream, the scheduler) and its wiring.
    "daemon": {"daemon", "app", "ingest", "store", "exporters", "report", "core"},
    "cli": {"cli", "daemon", "app", "ingest", "store", "exporters", "report", "core"},
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
}
# Libraries a layer may use where they are installed, never requiring them: each import of one
# sits in a `try` whose handler catches its absence (the tap: an app's OpenTelemetry span).
OPTIONAL = {"tap": {"opentelemetry"}}
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


def _guarded_imports(path: Path) -> set[str]:
    """The imports of a module inside a `try` that catches ImportError (or any Exception)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Try):
            continue
        caught = {
            n.id
            for h in node.handlers
            for n in ast.walk(h.type)
            if h.type is not None and isinstance(n, ast.Name)
        }
        if not caught & {"ImportError", "ModuleNotFoundError", "Exception"}:
            continue
        for inner in (n for stmt in node.body for n in ast.walk(stmt)):
            if isinstance(inner, ast.Import):
                names.update(a.name for a in inner.names)
            elif isinstance(inner, ast.ImportFrom) and inner.module and inner.level == 0:
                names.add(inner.module)
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
            guarded = _guarded_imports(p)
            for name in _imports(p):
                top = name.split(".")[0]
                if top in OPTIONAL.get(layer, set()) and name in guarded:
                    continue
                if top not in {*sys.stdlib_module_names, "sidewatch", *libraries}:
                    bad.append(f"{p.relative_to(PACKAGE)}: {name}")

    assert [] == bad


TAP = PACKAGE.parent / "tap" / "sidewatch_tap"


def test_the_tap_imports_only_the_standard_library_and_itself() -> None:
    """sidewatch-tap runs inside the agent's process: no dependency, nothing of the daemon's
    distribution (`sidewatch`), which may not be installed there."""
    bad = [
        f"{p.name}: {name}"
        for p in TAP.rglob("*.py")
        for name in _imports(p)
        if name.split(".")[0] not in {*sys.stdlib_module_names, "sidewatch_tap"}
        and not (name.split(".")[0] in OPTIONAL["tap"] and name in _guarded_imports(p))
    ]

    assert [] == bad
    assert (TAP / "__init__.py").is_file()


def test_an_optional_library_imported_without_a_guard_is_caught(tmp_path: Path) -> None:
    guarded = tmp_path / "guarded.py"
    guarded.write_text(
        "try:\n    from opentelemetry import trace\nexcept ImportError:\n    trace = None\n"
    )
    bare = tmp_path / "bare.py"
    bare.write_text("from opentelemetry import trace\n")

    assert ({"opentelemetry"}, set()) == (_guarded_imports(guarded), _guarded_imports(bare))


def test_every_package_of_sidewatch_is_a_layer_with_its_allowlists() -> None:
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}

    assert packages == set(ALLOWED) == set(LIBRARIES)


def test_the_docs_draw_every_layer_in_five_lines_in_the_order_allowed() -> None:
    development = (PACKAGE.parent / "docs" / "internals" / "development.md").read_text()
    block = development[development.index("```text\n") + 8 :]
    drawing = block[: block.index("```")].splitlines()
    named = [re.findall(r"\b[a-z_]+\b", line.strip().split("  ")[0]) for line in drawing[:4]]
    rows = [set(words) & set(ALLOWED) for words in named]

    assert 5 == len(drawing)
    assert set(ALLOWED) == set().union(*rows)
    for upper, lower in itertools.pairwise(rows):  # each row may use the one below
        assert all(lower <= ALLOWED[layer] for layer in upper - {"cli"})
    assert all(name in drawing[4] for name in (*SHARED, "tap"))


# The store stores, the app decides (issue 30): the store takes core's records (facts, model,
# vocabulary, the record types of checkpoints and settled waits), never its judgement. An
# evaluation, a classification or a checkpoint's reckoning happens in app/, with `now` passed
# in there, so `now` enters core/ from app/ alone.
JUDGEMENT = {"sidewatch.core.engine", "sidewatch.core.health"}
RECORDS_ONLY = {"sidewatch.core.checkpoint", "sidewatch.core.settled"}


def _store_judges(package: Path) -> list[str]:
    """Every import in store/ of core's judgement: a module of it, or a function of a module
    whose records the store may take."""
    bad = []
    for p in (package / "store").rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text(), str(p))):
            if isinstance(node, ast.Import):
                named = [(a.name, None) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                named = [(node.module, a.name) for a in node.names]
            else:
                continue
            for module, name in named:
                if module in JUDGEMENT or (
                    module in RECORDS_ONLY and (name is None or not _is_record(module, name))
                ):
                    bad.append(f"{p.relative_to(package)}: {module}{f'.{name}' if name else ''}")
    return bad


def _is_record(module: str, name: str) -> bool:
    """A class or a constant of `module` (a record type, a bound), not a function."""
    return not inspect.isfunction(getattr(importlib.import_module(module), name))


def test_the_store_takes_cores_records_never_its_judgement() -> None:
    assert [] == _store_judges(PACKAGE)


@pytest.mark.parametrize(
    "imported",
    [
        "from sidewatch.core.engine import evaluate",
        "from sidewatch.core.health import classify",
        "from sidewatch.core.settled import restored",
        "import sidewatch.core.engine",
    ],
)
def test_a_store_that_judges_is_caught(tmp_path: Path, imported: str) -> None:
    package = tmp_path / "sidewatch"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    path = package / "store" / "repo.py"
    path.write_text(f"{path.read_text()}\n\ndef _late() -> None:\n    {imported}\n")

    assert 1 == len(_store_judges(package))


def _graph(package: Path) -> dict[str, set[str]]:
    """module -> the sidewatch modules it imports (at its top or in a function); a package's
    __init__ stands for the package."""
    modules = {
        ".".join(("sidewatch", *p.relative_to(package).with_suffix("").parts)).removesuffix(
            ".__init__"
        ): p
        for p in package.rglob("*.py")
        if "versions" not in p.parts
    }
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                edges |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                edges |= {f"{node.module}.{a.name}" for a in node.names} | {node.module}
        graph[name] = {e for e in edges if e in modules and e != name and not _parent(e, name)}
    return graph


def _parent(package: str, module: str) -> bool:
    return module.startswith(f"{package}.")


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected sets of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            ring = []
            while True:
                w = stack.pop()
                ring.append(w)
                if w == v:
                    break
            if len(ring) > 1:
                out.append(sorted(ring))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_module_imports_itself_through_others() -> None:
    assert [] == _circles(_graph(PACKAGE))


def test_a_circle_is_caught(tmp_path: Path) -> None:
    package = tmp_path / "sidewatch"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    path = package / "core" / "model.py"
    path.write_text(
        f"{path.read_text()}\n\ndef _late() -> None:\n    import sidewatch.core.engine\n"
    )

    circles = _circles(_graph(package))
    assert [] == _circles(_graph(PACKAGE))
    assert 1 == len(circles)
    assert {"sidewatch.core.engine", "sidewatch.core.model"} <= set(circles[0])


# No module a newcomer must read whole: past this, a module holds more than one thing.
MAX_LINES = 600


def test_no_module_of_the_package_is_over_600_lines() -> None:
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in PACKAGE.rglob("*.py")
        if "versions" not in p.parts and (n := len(p.read_text().splitlines())) > MAX_LINES
    }

    assert {} == long
