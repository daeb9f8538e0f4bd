"""A short run of `bench/soak.py` (the real daemon under mixed load, with the store held by
another process, and a SIGKILL and restart): what the answers accepted, skipped and rejected
is exactly what the store holds, every answer was the one expected, and the daemon lived."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SOAK = Path(__file__).resolve().parents[2] / "bench" / "soak.py"


def test_a_short_soak_with_faults_keeps_answers_and_store_in_agreement(tmp_path: Path) -> None:
    summary = tmp_path / "soak.json"
    run = subprocess.run(
        [
            sys.executable,
            str(SOAK),
            "--duration",
            "20",
            "--clients",
            "2",
            "--hold-every",
            "6",
            "--kill-at",
            "0.4",
            "--json",
            str(summary),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    result = json.loads(summary.read_text()) if summary.exists() else {}

    assert 0 == run.returncode, run.stdout + run.stderr
    answered, stored = result["answered"], result["stored"]
    unanswered = result["unanswered_stored"]
    assert {k: v + unanswered.get(k, 0) for k, v in answered.items()} == {
        k: stored[k] for k in answered
    }
    assert answered["units"] > 0 and answered["rejected"] > 0
    assert ([], [], []) == (
        result["acked_missing"],
        result["refused_but_stored"],
        result["unexpected"],
    )
    assert (1, True) == (result["faults"]["kills"], result["faults"]["store_holds"] >= 1)
    assert result["retries_503"] >= 1
    assert any(key.endswith(" 408") for key in result["answers"])
    assert (False, -15) == (result["died_by_itself"], result["exit_code"])
