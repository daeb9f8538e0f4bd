"""`sidewatch ingest` reads a file with the garbage collector at its bulk thresholds, and
what was loaded before frozen out of its scans (bench/ingest.py measures what that saves);
both are put back after each file, also when reading fails."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sidewatch.cli.main import INGEST_GC_THRESHOLD, cli
from sidewatch.ingest.agui import Interpreter, UnitResult


def test_a_file_is_read_with_few_collections_and_the_defaults_come_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[tuple[int, int, int], bool]] = []
    read = Interpreter.read_chunks

    def read_chunks(self: Interpreter, chunks: Any) -> UnitResult:
        seen.append((gc.get_threshold(), gc.get_freeze_count() > 0))
        return read(self, chunks)

    monkeypatch.setattr(Interpreter, "read_chunks", read_chunks)
    stream = tmp_path / "a.ndjson"
    stream.write_text('{"type":"STEP_STARTED","stepName":"plan"}\n')
    before = gc.get_threshold()

    result = CliRunner().invoke(
        cli, ["ingest", "--db", f"sqlite:///{tmp_path / 's.db'}", str(stream), str(stream)]
    )

    assert 0 == result.exit_code, result.output
    assert [(INGEST_GC_THRESHOLD, True)] * 2 == seen
    assert before == gc.get_threshold()
    assert 0 == gc.get_freeze_count()


def test_the_defaults_come_back_when_reading_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def read_chunks(self: Interpreter, chunks: Any) -> UnitResult:
        list(chunks)  # the file read (and closed) before the failure
        raise MemoryError

    monkeypatch.setattr(Interpreter, "read_chunks", read_chunks)
    stream = tmp_path / "a.ndjson"
    stream.write_text('{"type":"STEP_STARTED","stepName":"plan"}\n')
    before = gc.get_threshold()

    result = CliRunner().invoke(
        cli, ["ingest", "--db", f"sqlite:///{tmp_path / 's.db'}", str(stream)]
    )

    assert isinstance(result.exception, MemoryError)
    assert before == gc.get_threshold()
    assert 0 == gc.get_freeze_count()
