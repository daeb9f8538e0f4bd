"""How long making a new SQLite store takes, as a whole process: from `sqlite-schema.sql` (what
`open_store` does for a new file: store.sqlite_schema) beside running the migrations on it
(`upgrade(replay=True)`, what the script is checked against), and `python -c pass` (the
floor), in the same run. Each figure is the median of several runs, each into a new file.

    .venv/bin/python bench/new_store.py [--runs 7]

Target: the script at least twice as fast as the migrations, above the floor.
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
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

_SCRIPT = (
    "import sys\nfrom sidewatch.store.db import open_store\n"
    "open_store(f'sqlite:///{sys.argv[1]}').dispose()\n"
)
_MIGRATED = (
    "import sys\nfrom sidewatch.store.db import open_store, upgrade\n"
    "e = open_store(f'sqlite:///{sys.argv[1]}', migrate=False)\n"
    "upgrade(e, replay=True)\ne.dispose()\n"
)


def seconds(code: str, runs: int, tmp: Path) -> float:
    def once(n: int) -> float:
        t0 = time.perf_counter()
        argv = [sys.executable, "-c", code, str(tmp / f"{n}.db")]
        subprocess.run(argv, check=True, capture_output=True, cwd=ROOT, env=ENV)
        return time.perf_counter() - t0

    once(-1)  # caches bytecode
    return statistics.median(once(n) for n in range(runs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    runs = ap.parse_args().runs
    with tempfile.TemporaryDirectory(prefix="sidewatch-bench-") as tmp:
        floor = seconds("pass", runs, Path(tmp) / "floor")
        (Path(tmp) / "script").mkdir()
        (Path(tmp) / "migrated").mkdir()
        script = seconds(_SCRIPT, runs, Path(tmp) / "script")
        migrated = seconds(_MIGRATED, runs, Path(tmp) / "migrated")
    print(f"{'python -c pass (floor)':34} {floor:.3f} s")
    print(f"{'new store from sqlite-schema.sql':34} {script:.3f} s  (+{script - floor:.3f} s)")
    print(f"{'new store by the migrations':34} {migrated:.3f} s  (+{migrated - floor:.3f} s)")
    ratio = (migrated - floor) / (script - floor)
    print(f"the script: {ratio:.1f}x faster above the floor (target >= 2x)")


if __name__ == "__main__":
    main()
