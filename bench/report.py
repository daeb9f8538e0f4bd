"""The audit report over a window with 100,000 waits, beside its floor measured in the same
run: classifying the same waits once (`sidewatch audit`). The report reads the facts once and
classifies the waits at the window's end and at its start, then renders.

Two windows: a day (every wait requested within it: none is classified at its start) and 30
minutes (about half of the waits requested before its start: those are classified twice).

    .venv/bin/python bench/report.py [--waits 100000]

Target: the report within 2x one audit of the same waits.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from audit import NOW, populate

from sidewatch.app.audit import audit
from sidewatch.app.report import render, report
from sidewatch.config import Config
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store

DAY = 86_400_000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--waits", type=int, default=100_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'report.db'}"
        populate(url, args.waits)
        engine = open_store(url)
        store, policies = Store(engine), Config().policies
        # CPU seconds beside wall seconds: on a shared machine the wall clock also counts
        # the others' load.
        start, cpu = time.perf_counter(), time.process_time()
        audit(store, policies, NOW)
        floor, floor_cpu = time.perf_counter() - start, time.process_time() - cpu
        built = {}
        for name, window in (("1 day", DAY), ("30 min", DAY // 48)):
            start, cpu = time.perf_counter(), time.process_time()
            body = report(store, policies, NOW, window)
            built[name] = time.perf_counter() - start, time.process_time() - cpu
        sizes = {}
        for fmt in ("json", "md", "html"):
            t = time.perf_counter()
            sizes[fmt] = (len(render(body, fmt)), time.perf_counter() - t)
        engine.dispose()
    print(f"{args.waits:,} waits in the window")
    print(f"  one audit (floor) : {floor:7.2f} s  (CPU {floor_cpu:7.2f} s)")
    for name, (seconds, cpu) in built.items():
        print(
            f"  report, {name:<7} : {seconds:7.2f} s  (CPU {cpu:7.2f} s)  ratio "
            f"{seconds / floor:.2f}, by CPU {cpu / floor_cpu:.2f} (target <= 2.0)"
        )
    for fmt, (size, seconds) in sizes.items():
        print(f"  render {fmt:<4}       : {seconds:7.2f} s  {size / 1e6:6.1f} MB (30 min window)")


if __name__ == "__main__":
    main()
