"""`sidewatch ingest` of a 1,000,000-line file with no config: its peak memory (RSS) and time,
beside the same lines split in 10 files ingested by one command, and beside its floor measured
in the same run (issue 33): a process that only parses every line (`orjson.loads`) plus plain
`sqlite3` writing exactly the rows the one file's ingest stored, with the same schema, pragmas
and transactions (`floors.py`). Targets: under 200 MB (issue 31); at least 0.75 of the floor's
lines per second (issue 33)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).parent))
from floors import ratio_line, sqlite_write

BASE = 1_785_081_600_000


def run_lines(n: int) -> list[bytes]:
    """One run of a thread: input, start, model text, a tool call and its result, an end."""
    t, r, at = f"t{n % 5000}", f"r{n}", BASE + n * 10
    events = [
        {"type": "RUN_STARTED", "threadId": t, "runId": r, "timestamp": at},
        {"type": "TEXT_MESSAGE_START", "messageId": f"m{n}", "role": "assistant"},
        *(
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m{n}", "delta": "word "}
            for _ in range(4)
        ),
        {"type": "TEXT_MESSAGE_END", "messageId": f"m{n}"},
        {"type": "TOOL_CALL_START", "toolCallId": f"c{n}", "toolCallName": "lookup"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": f"c{n}", "delta": '{"q": 1}'},
        {"type": "TOOL_CALL_END", "toolCallId": f"c{n}"},
        {"type": "TOOL_CALL_RESULT", "toolCallId": f"c{n}", "messageId": f"x{n}", "content": "ok"},
        {"type": "RUN_FINISHED", "threadId": t, "runId": r, "timestamp": at + 5},
    ]
    return [orjson.dumps(e) for e in events]


def write(big: Path, parts: list[Path], lines: int) -> None:
    """`lines` lines of runs into `big`, and the same runs split in `parts`, streamed: the
    bench's own memory stays small, as a child's peak RSS starts from its parent's."""
    per_run = len(run_lines(0))
    step = -(-lines // (len(parts) * per_run)) * per_run  # each part whole runs
    with big.open("wb") as out:
        written, n, part = 0, 0, None
        while written < lines:
            if written % step == 0:
                if part is not None:
                    part.close()
                part = parts[written // step].open("wb")
            for line in run_lines(n)[: lines - written]:
                out.write(line + b"\n")
                part.write(line + b"\n")  # type: ignore[union-attr]
                written += 1
            n += 1
        if part is not None:
            part.close()


PARSE = """
import sys, orjson
with open(sys.argv[1], "rb") as fh:
    for line in fh:
        if line.strip():
            orjson.loads(line)
"""


def parse(path: Path) -> tuple[float, float]:
    """Seconds and CPU seconds of a process that only parses every line of `path` (the parse
    floor)."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", PARSE, str(path)])
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit("the parse floor failed")
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime


def ingest(db: Path, *files: Path) -> tuple[float, float, float]:
    """Seconds, peak RSS (MB) and CPU seconds of one `sidewatch ingest` process."""
    cmd = [sys.executable, "-m", "sidewatch", "ingest", "--db", f"sqlite:///{db}", *map(str, files)]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed")
    return seconds, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=1, help="best of N for each side")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        big = root / "day.ndjson"
        parts = [root / f"part{i}.ndjson" for i in range(10)]
        write(big, parts, args.lines)
        size = big.stat().st_size / 1e6
        floor = min(parse(big) for _ in range(args.repeat))
        one = min(ingest(root / f"one-{n}.db", big) for n in range(args.repeat))
        ten = ingest(root / "ten.db", *parts)
        written = [
            sqlite_write(root / "one-0.db", root / f"floor-{n}.db") for n in range(args.repeat)
        ]
        floor_write = min(written, key=lambda w: w.seconds)
    print(f"file ingest of {args.lines} lines ({size:.0f} MB), no config:")
    print(f"  one file        {one[0]:6.2f} s   peak RSS {one[1]:6.0f} MB")
    print(f"  split in 10     {ten[0]:6.2f} s   peak RSS {ten[1]:6.0f} MB")
    print("  " + ratio_line("one file", args.lines, one[0], floor[0], floor_write))
    cpu = (floor[1] + floor_write.cpu) / one[2]
    print(
        f"  CPU seconds: sidewatch {one[2]:.2f}, floor: parse {floor[1]:.2f} + write "
        f"{floor_write.cpu:.2f}; ratio by CPU {cpu:.2f} (steadier than wall time under load)"
    )
    print(f"  load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    ratio = (floor[0] + floor_write.seconds) / one[0]
    print(f"  ratio to parse + write {ratio:.2f} (target >= 0.75)")
    if one[1] >= 200:
        raise SystemExit(f"peak RSS {one[1]:.0f} MB, over 200 MB")


if __name__ == "__main__":
    main()
