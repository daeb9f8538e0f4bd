"""A producer's own virtual environment is used only when it was built from the requirements
file as it is now; otherwise the test that needs it fails, naming the make target."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from tests.producers.venvs import producer_python


def _layout(tmp_path: Path, stamp: str | None) -> tuple[Path, Path]:
    here, tools = tmp_path / "producers", tmp_path / ".tools"
    here.mkdir()
    (here / "requirements-demo.txt").write_text("demo-producer==1.0\n")
    if stamp is not None:
        (tools / "venv-demo" / "bin").mkdir(parents=True)
        (tools / "venv-demo" / "bin" / "python").write_text("")
        (tools / "venv-demo" / ".installed").write_text(stamp + "\n")
    return here, tools


def test_a_venv_built_from_the_current_requirements_is_used(tmp_path: Path) -> None:
    here, tools = _layout(tmp_path, hashlib.sha256(b"demo-producer==1.0\n").hexdigest())

    assert tools / "venv-demo" / "bin" / "python" == producer_python("demo", tools, here)


def test_a_missing_venv_fails_loudly(tmp_path: Path) -> None:
    here, tools = _layout(tmp_path, None)

    with pytest.raises(
        pytest.fail.Exception, match=re.escape("missing: run `make producer-venvs`")
    ):
        producer_python("demo", tools, here)


def test_a_venv_older_than_its_requirements_fails_loudly(tmp_path: Path) -> None:
    here, tools = _layout(tmp_path, hashlib.sha256(b"demo-producer==0.9\n").hexdigest())

    with pytest.raises(pytest.fail.Exception, match=re.escape("predates requirements-demo.txt")):
        producer_python("demo", tools, here)
