"""Every public class, function and method of the core says what it is."""

from __future__ import annotations

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "sidewatch" / "core"


def undocumented(nodes: list[ast.stmt], where: str) -> list[str]:
    out = []
    for node in nodes:
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_"):
            if ast.get_docstring(node) is None:
                out.append(f"{where}:{node.lineno} {node.name}")
            if isinstance(node, ast.ClassDef):
                out += undocumented(node.body, where)
    return out


def test_every_public_name_of_the_core_has_a_docstring() -> None:
    missing = [
        name
        for p in sorted(CORE.glob("*.py"))
        for name in undocumented(ast.parse(p.read_text()).body, p.name)
    ]

    assert [] == missing
