"""The audit report over a window with 100,000 waits, beside its floor measured in the same
run: classifying the same waits once (`sidewatch audit`), which the report does twice (at the
window's end and at its start) before it renders.

    .venv/bin/python bench/report.py [--waits 100000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from audit import NOW, populate

from sidewatch.config import Config
from sidewatch.daemon.pipeline import audit, report
from sidewatch.daemon.reports import render
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
        start = time.perf_counter()
        audit(store, policies, NOW)
        floor = time.perf_counter() - start
        start = time.perf_counter()
        body = report(store, policies, NOW, DAY)
        built = time.perf_counter() - start
        sizes = {}
        for fmt in ("json", "md", "html"):
            t = time.perf_counter()
            sizes[fmt] = (len(render(body, fmt)), time.perf_counter() - t)
        engine.dispose()
    print(f"{args.waits:,} waits in the window")
    print(f"  one audit (floor) : {floor:7.2f} s")
    print(f"  report built      : {built:7.2f} s  ratio {built / floor:.1f} (target <= 2.0)")
    for fmt, (size, seconds) in sizes.items():
        print(f"  render {fmt:<4}       : {seconds:7.2f} s  {size / 1e6:6.1f} MB")


if __name__ == "__main__":
    main()
