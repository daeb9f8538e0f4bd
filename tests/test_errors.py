"""errors.py draws the exception tree once: the drawing is the classes, and no error of the tree
is defined anywhere else."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from sidewatch import errors

PACKAGE = Path(__file__).resolve().parents[1] / "sidewatch"


def drawn(doc: str) -> dict[str, str | None]:
    """Each class of the drawing -> the class it hangs from (None for the root)."""
    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []
    for line in doc.splitlines():
        found = re.match(r"^([ │├└─]*)([A-Z][A-Za-z]+)(\s|$)", line)
        if not found or not found.group(1).startswith("    "):
            continue
        column, name = len(found.group(1)), found.group(2)
        while stack and stack[-1][0] >= column:
            stack.pop()
        parents[name] = stack[-1][1] if stack else None
        stack.append((column, name))
    return parents


def defined() -> dict[str, str | None]:
    """Each subclass of SidewatchError -> its base, as the code has it."""
    out: dict[str, str | None] = {"SidewatchError": None}
    todo = [errors.SidewatchError]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            out[sub.__name__] = cls.__name__
            todo.append(sub)
    return out


def test_the_drawn_tree_is_the_class_tree() -> None:
    assert errors.__doc__ is not None

    assert defined() == drawn(errors.__doc__)


def test_no_error_of_the_tree_is_defined_outside_errors_py() -> None:
    tree = set(defined())
    outside = [
        f"{p.relative_to(PACKAGE)}: {node.name}"
        for p in PACKAGE.rglob("*.py")
        if p.name != "errors.py" or p.parent != PACKAGE
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.ClassDef)
        and any(isinstance(b, ast.Name) and b.id in tree for b in node.bases)
    ]

    assert [] == outside


# -- the command that installs an optional extra, for the installation it runs from --------

CHECKOUT = '{"url": "file:///home/me/sidewatch", "dir_info": {"editable": true}}'


@pytest.mark.parametrize(
    ("recorded", "prefix", "expected"),
    [
        (
            CHECKOUT,
            "/home/me/sidewatch/.venv",
            "cd /home/me/sidewatch && .venv/bin/pip install -e '.[postgres]'",
        ),
        (CHECKOUT, "/opt/venv", "/opt/venv/bin/pip install -e '/home/me/sidewatch[postgres]'"),
        (
            '{"url": "file:///src/side%20watch", "dir_info": {}}',
            "/opt/venv",
            "/opt/venv/bin/pip install '/src/side watch[postgres]'",
        ),
        (None, "/opt/venv", "pip install 'sidewatch[postgres]'"),
        (
            '{"url": "https://files.example/sidewatch-1.0-py3-none-any.whl", "archive_info": {}}',
            "/opt/venv",
            "pip install 'sidewatch[postgres]'",
        ),
        ("not json", "/opt/venv", "pip install 'sidewatch[postgres]'"),
    ],
    ids=["checkout-with-make-venv", "checkout-other-venv", "directory", "wheel", "url", "bad"],
)
def test_the_install_hint_is_the_one_for_how_sidewatch_was_installed(
    recorded: str | None, prefix: str, expected: str
) -> None:
    assert expected == errors.hint_for("postgres", recorded, prefix)


def test_the_install_hint_of_this_editable_checkout_installs_it_editable() -> None:
    hint = errors.install_hint("nats")

    assert "install -e " in hint  # the test environment is `make`'s editable install
    assert hint.endswith("[nats]'")
    assert "pip install 'sidewatch[nats]'" != hint
