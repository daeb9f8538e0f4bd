"""A re-audit of every open wait (a policy change) in budgeted ticks, as the daemon runs it,
beside the same re-audit in one unbounded tick on a copy of the same store: how many ticks,
the longest, their total against the one tick (what slicing costs: each tick reads the dirty
marks and the due threads again), and the backlog after each.

    .venv/bin/python bench/reaudit.py [--waits 100000] [--budget 1.0]

SQLite. The daemon's budget is half of `auditor.interval` (15 s by default); a smaller one
here shows the slicing at a size a quick run can hold.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import tempfile
import time
from pathlib import Path

from audit import NOW, populate

from sidewatch.app.audit import Auditor
from sidewatch.config import Config
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store

MIN = 60_000


def _reaudited(url: str) -> Auditor:
    """The store audited once under the default policy, then given a stricter one: every
    thread with an open wait is marked for re-audit."""
    engine = open_store(url)
    policies = Config().policies
    auditor = Auditor(Store(engine), policies)
    auditor.tick(NOW)
    strict = tuple(
        dataclasses.replace(
            p, thresholds=dataclasses.replace(p.thresholds, heartbeat_freshness_ms=5 * MIN)
        )
        for p in policies
    )
    auditor.use_policies(strict)
    return auditor


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--waits", type=int, default=100_000)
    ap.add_argument("--budget", type=float, default=1.0, help="seconds a tick classifies")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        sliced_db, whole_db = Path(tmp) / "sliced.db", Path(tmp) / "whole.db"
        made = time.perf_counter()
        populate(f"sqlite:///{sliced_db}", args.waits)
        made = time.perf_counter() - made
        shutil.copy(sliced_db, whole_db)  # the same waits, for the one unbounded tick
        sliced = _reaudited(f"sqlite:///{sliced_db}")
        whole = _reaudited(f"sqlite:///{whole_db}")

        start = time.perf_counter()
        one = whole.tick(NOW + 1000)
        whole_s = time.perf_counter() - start
        ticks: list[tuple[float, int]] = []
        while not ticks or ticks[-1][1]:
            start = time.perf_counter()
            report = sliced.tick(NOW + 1000, args.budget)
            ticks.append((time.perf_counter() - start, report.backlog))
        for auditor in (sliced, whole):
            auditor.store.engine.dispose()

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    total = sum(s for s, _ in ticks)
    print(f"{args.waits:,} open waits re-audited (generated in {made:.0f}s; load average {load})")
    print(f"  one unbounded tick : {whole_s:7.2f} s  ({one.threads:,} threads)")
    print(
        f"  budgeted ticks     : {len(ticks)} of {args.budget:g} s budget, longest "
        f"{max(s for s, _ in ticks):5.2f} s, total {total:7.2f} s, "
        f"ratio to the one tick {total / whole_s:4.2f}"
    )
    print(f"  backlog after each : {', '.join(f'{b:,}' for _, b in ticks)}")


if __name__ == "__main__":
    main()
