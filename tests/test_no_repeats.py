"""No block of six or more lines is repeated in `sidewatch/` outside the migrations: code
written twice is one helper or one declaration. The check is here, not in a tool CI lacks.

Each source file (Python and the page templates) becomes its lines: white space folded,
comments cut, and these left out:
- blank and comment-only lines;
- import statements, whole: a module that needs the same ten names imports them again, and
  the remedy (a star import, a re-export, module-qualified names everywhere) would be worse
  than the list. Linters' duplicate checks leave imports out for the same reason.
Then every window of six consecutive lines is compared with every other; two equal windows that
do not overlap are a repeat. A window of punctuation alone (the closing of nested brackets) is
no block. The migrations are left out: each is a frozen record of the schema at its step, and
copying a column's declaration is what they are for."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "sidewatch"
MIGRATIONS = PACKAGE / "store" / "migrations"
WINDOW = 6
PUNCTUATION = re.compile(r"[()\[\]{},:;.\s]*")

Line = tuple[int, str]  # (line number, normalized text)


def _python_lines(text: str) -> list[Line]:
    """A Python file's lines: comments cut, blank lines and import statements left out."""
    imports: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import | ast.ImportFrom):
            imports.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    lines = text.splitlines()
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            row, col = token.start
            lines[row - 1] = lines[row - 1][:col]
    return [
        (number, norm)
        for number, line in enumerate(lines, 1)
        if number not in imports and (norm := " ".join(line.split()))
    ]


def _template_lines(text: str) -> list[Line]:
    return [
        (number, norm)
        for number, line in enumerate(text.splitlines(), 1)
        if (norm := " ".join(line.split()))
    ]


def sources(root: Path) -> dict[str, list[Line]]:
    out = {}
    for path in sorted(root.rglob("*")):
        if MIGRATIONS in path.parents or not path.is_file():
            continue
        if path.suffix == ".py":
            out[str(path.relative_to(root))] = _python_lines(path.read_text())
        elif path.suffix == ".html":
            out[str(path.relative_to(root))] = _template_lines(path.read_text())
    return out


def repeats(files: dict[str, list[Line]], window: int = WINDOW) -> list[str]:
    """Each window of `window` lines that stands again elsewhere (not overlapping itself),
    as `first file:lines ~ second file:lines`, one row per pair of places (the first window of
    a longer repeat stands for it)."""
    seen: dict[tuple[str, ...], list[tuple[str, int]]] = defaultdict(list)
    for name, lines in files.items():
        for i in range(len(lines) - window + 1):
            block = tuple(text for _, text in lines[i : i + window])
            if not all(PUNCTUATION.fullmatch(text) for text in block):
                seen[block].append((name, i))
    rows, reported = [], set()
    for places in seen.values():
        for a, (name_a, i) in enumerate(places):
            for name_b, j in places[a + 1 :]:
                if name_a == name_b and j - i < window:
                    continue  # a run of like lines meeting itself, not a second copy
                # a longer repeat: report it once, where it begins
                if (name_a, i - 1, name_b, j - 1) in reported:
                    reported.add((name_a, i, name_b, j))
                    continue
                reported.add((name_a, i, name_b, j))
                la, lb = files[name_a], files[name_b]
                rows.append(
                    f"{name_a}:{la[i][0]}-{la[i + window - 1][0]} ~ "
                    f"{name_b}:{lb[j][0]}-{lb[j + window - 1][0]}"
                )
    return sorted(rows)


def test_no_block_of_six_lines_is_repeated_outside_the_migrations() -> None:
    found = repeats(sources(PACKAGE))

    assert [] == found, "repeated blocks (make one helper or declaration of each):\n" + "\n".join(
        found
    )


def test_the_check_finds_a_repeat_through_comments_but_none_in_imports_or_brackets() -> None:
    steps = [f"    total += step_{i}(total)" for i in range(6)]
    imports = "from x import (\n" + "".join(f"    n{i},\n" for i in range(8)) + ")\n"
    one = "\n".join([imports, "def f(total):", *steps, "    return total", ""])
    commented = [steps[0] + "  # the same steps", "    # again", *steps[1:]]
    two = "\n".join([imports, "def g(total):", *commented, "    return total", ""])
    x, y = "x = [[[[[[[\n" + "]\n" * 7, "y = [[[[[[[\n" + "]\n" * 7

    found = repeats({"a.py": _python_lines(one), "b.py": _python_lines(two)})

    assert ["a.py:13-18 ~ b.py:13-19"] == found  # one row for the 7 shared lines
    assert [] == repeats({"a.py": _python_lines(imports), "b.py": _python_lines(imports)})
    assert [] == repeats({"a.py": _python_lines(x), "b.py": _python_lines(y)})
