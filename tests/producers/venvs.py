"""The producers' own virtual environments, for integrations whose pins clash with sidewatch's:
`.tools/venv-<name>`, built by `make producer-venvs` from `requirements-<name>.txt` beside this
file. A test that needs one fails loudly when it is missing or older than its requirements."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

HERE = Path(__file__).parent
TOOLS = Path(os.environ.get("SIDEWATCH_TOOLS", HERE.parents[1] / ".tools"))


def producer_python(name: str, tools: Path = TOOLS, here: Path = HERE) -> Path:
    """The interpreter of the producer venv `name`, built from its current requirements."""
    reqs = here / f"requirements-{name}.txt"
    venv = tools / f"venv-{name}"
    stamp, python = venv / ".installed", venv / "bin" / "python"
    want = hashlib.sha256(reqs.read_bytes()).hexdigest()
    if not python.exists() or not stamp.exists():
        pytest.fail(f"{venv} is missing: run `make producer-venvs`", pytrace=False)
    if stamp.read_text().strip() != want:
        pytest.fail(f"{venv} predates {reqs.name}: run `make producer-venvs`", pytrace=False)
    return python
