"""How long a command takes as a whole process, beside `python -c pass` in the same run (the
floor: the interpreter's own start). Each figure is the median of several runs.

    .venv/bin/python bench/startup.py [--runs 7]

Targets: `sidewatch --help` and `sidewatch check-config` under 0.25 s; `sidewatch audit` on
the demo store under 0.4 s.

The commands run with bytecode caching on (as an installed copy runs: pip compiles it), even
where the environment sets PYTHONDONTWRITEBYTECODE, and each once untimed first: otherwise
every run would compile the package from source.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEED = ROOT / "sidewatch" / "cli" / "seed-audit.ndjson"
SW = [sys.executable, "-m", "sidewatch"]
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def seconds(argv: list[str], runs: int) -> float:
    times = []
    subprocess.run(argv, check=True, capture_output=True, cwd=ROOT, env=ENV)  # caches bytecode
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, cwd=ROOT, env=ENV)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    runs = ap.parse_args().runs
    with tempfile.TemporaryDirectory(prefix="sidewatch-bench-") as tmp:
        db = f"sqlite:///{Path(tmp) / 'demo.db'}"
        subprocess.run([*SW, "ingest", "--db", db, str(SEED)], check=True, capture_output=True)
        cases = [
            ("python -c pass (floor)", [sys.executable, "-c", "pass"], None),
            ("sidewatch --help", [*SW, "--help"], 0.25),
            ("sidewatch check-config", [*SW, "check-config", "config.example.yaml"], 0.25),
            ("sidewatch audit (demo store)", [*SW, "audit", "--db", db], 0.4),
        ]
        floor = None
        for name, argv, target in cases:
            s = seconds(argv, runs)
            floor = s if floor is None else floor
            extra = "" if target is None else f"  (+{s - floor:.3f} s; target < {target} s)"
            print(f"{name:32} {s:.3f} s{extra}")


if __name__ == "__main__":
    main()
