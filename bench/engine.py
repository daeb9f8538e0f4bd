"""The engine on one long thread beside the same traffic spread over many threads, in the same
run (issue 13's target: the long thread within 1.5x), and the old replay (`tests/oracle.py`)
at a smaller size to show the growth the engine removes. Pure: facts built in memory.

    .venv/bin/python bench/engine.py [--runs 10000] [--threads 1000] [--oracle-runs 300]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sidewatch.core.engine import evaluate
from sidewatch.core.facts import (
    AnswerFact,
    HeartbeatFact,
    InterruptFact,
    RunFact,
    RunMark,
    SignalFact,
    SignalKind,
    ThreadFacts,
)
from sidewatch.core.model import Code, Verdict
from sidewatch.core.policy import DEFAULT_POLICY, Policy
from tests.oracle import oracle_verdicts

MIN = 60_000
TARGET = 1.5


def history(thread: str, runs: int, every: int, start: int = 0) -> ThreadFacts:
    """`runs` runs on one thread; every `every`-th run asks for approval, the next run's input
    accepts it, and the runs in between finish normally with a heartbeat each."""
    interrupts, facts_runs, answers, heartbeats, signals = [], [], [], [], []
    seq = start * 10
    at = 1_000_000
    pending: str | None = None
    for n in range(runs):
        run = f"run-{n + 1}"
        at += MIN
        seq += 1
        facts_runs.append(RunFact(run_id=run, thread_id=thread, mark=RunMark.INPUT, at=at, seq=seq))
        if pending is not None:
            answers.append(
                AnswerFact(
                    thread_id=thread,
                    run_id=run,
                    interrupt_id=pending,
                    code=Code.ACCEPT,
                    at=at,
                    seq=seq,
                )
            )
            pending = None
        seq += 1
        facts_runs.append(
            RunFact(run_id=run, thread_id=thread, mark=RunMark.STARTED, at=at, seq=seq)
        )
        seq += 1
        heartbeats.append(HeartbeatFact(thread_id=thread, run_id=run, at=at, seq=seq, handle=True))
        seq += 1
        if n % every == every - 1:
            iid = f"int-{n}"
            interrupts.append(
                InterruptFact(
                    thread_id=thread, run_id=run, interrupt_id=iid, at=at, seq=seq, handle=True
                )
            )
            facts_runs.append(
                RunFact(run_id=run, thread_id=thread, mark=RunMark.INTERRUPTED, at=at, seq=seq)
            )
            seq += 1
            signals.append(
                SignalFact(
                    kind=SignalKind.ROUTE,
                    at=at,
                    seq=seq,
                    thread_id=thread,
                    interrupt_id=iid,
                    approver_ref="ops",
                    delivered=True,
                )
            )
            pending = iid
        else:
            facts_runs.append(
                RunFact(run_id=run, thread_id=thread, mark=RunMark.FINISHED, at=at, seq=seq)
            )
    return ThreadFacts(
        thread_id=thread,
        interrupts=tuple(interrupts),
        runs=tuple(facts_runs),
        answers=tuple(answers),
        heartbeats=tuple(heartbeats),
        signals=tuple(signals),
    )


def _policy(action: str | None, reason: str | None) -> Policy:
    return DEFAULT_POLICY


def timed(threads: list[ThreadFacts], now: int) -> tuple[float, list[Verdict]]:
    start = time.perf_counter()
    verdicts = [w.verdict for t in threads for w in evaluate(t, _policy, now).waits]
    return time.perf_counter() - start, verdicts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1_000)
    ap.add_argument("--oracle-runs", type=int, default=300)
    args = ap.parse_args()

    now = 1_000_000 + (args.runs + 10) * MIN
    long = [history("long", args.runs, args.every)]
    per = args.runs // args.threads
    spread = [history(f"t-{k}", per, args.every, start=k * per) for k in range(args.threads)]
    long_s, long_v = timed(long, now)
    spread_s, spread_v = timed(spread, now)
    assert len(long_v) == len(spread_v), (len(long_v), len(spread_v))
    ratio = long_s / spread_s
    verdict = "meets" if ratio <= TARGET else "MISSES"
    print(f"engine, one thread of {args.runs} runs, a wait every {args.every}: {long_s:.3f} s")
    print(f"engine, the same traffic over {args.threads} threads:   {spread_s:.3f} s (floor)")
    print(f"ratio {ratio:.2f} (target <= {TARGET}: {verdict}), {len(long_v)} waits each")

    small = history("long", args.oracle_runs, args.every)
    start = time.perf_counter()
    oracle_verdicts(small, _policy, now)
    oracle_s = time.perf_counter() - start
    engine_s, _ = timed([small], now)
    print(
        f"oracle (the old replay), one thread of {args.oracle_runs} runs: {oracle_s:.3f} s; "
        f"engine on the same thread: {engine_s:.3f} s ({oracle_s / engine_s:.0f}x)"
    )


if __name__ == "__main__":
    main()
