"""Every capture's reading, written down to be compared across a change of ingest's code: the
facts, rejects and line kinds of each capture under tests/ingest/producers/fixtures and
/work/shared/fixtures (or the directories given), with frontend tools off and on, as a token of
every kind, of `agui` only and of the evidence kinds only, both as one body and as a file
streamed a few lines a unit. No store: the interpreter's own output, digests as stored by
default (not keyed).

    .venv/bin/python bench/ingest_facts.py record before.json
    .venv/bin/python bench/ingest_facts.py compare before.json   # exit 1 on any difference
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import orjson

from sidewatch.ingest.agui import Interpreter, UnitResult
from sidewatch.ingest.digest import RefProtector
from sidewatch.ingest.opencalls import OpenCalls
from sidewatch.ingest.reader import FileCuts, frame

ROOT = Path(__file__).resolve().parent.parent
DIRS = (ROOT / "tests/ingest/producers/fixtures", Path("/work/shared/fixtures"))
FRONTEND = ("confirm_*", "approve_*", "delete_file", "send_email", "deleteFile")
KINDS: dict[str, frozenset[str] | None] = {
    "all": None,
    "agui": frozenset({"agui"}),
    "evidence": frozenset({"route", "decision", "action", "receipt", "heartbeat"}),
}
RECEIVED = 1_785_083_340_000
SEQ_BASE = 7 << 32


def reading(
    body: bytes, frontend: tuple[str, ...], allowed: frozenset[str] | None
) -> list[dict[str, object]]:
    """The capture read as one body, then as a file cut in units of 7 lines: what each gives."""
    protect = RefProtector(b"k" * 32, ("role:", "team:"), False)
    out = []
    whole = Interpreter(
        RECEIVED, SEQ_BASE, protect, 1 << 20, frontend_tools=frontend, allowed=allowed
    )
    out.append(_result(whole.read(frame(body)), protect))
    lines = body.split(b"\n")
    cuts = FileCuts([lines[i : i + 5] for i in range(0, len(lines), 5)], 7)
    calls = OpenCalls()
    while cuts.more():
        unit = Interpreter(
            RECEIVED, SEQ_BASE, protect, 1 << 20, frontend_tools=frontend, allowed=allowed,
            open_calls=calls,
        )  # fmt: skip
        res = unit.read_chunks(cuts.unit(unit.calls))
        calls.settle(unit.took, unit.left)
        out.append(_result(res, protect))
    return out


def _result(res: UnitResult, protect: RefProtector) -> dict[str, object]:
    return {
        "facts": [repr(f) for f in protect.digests(res.facts)],
        "rejects": [repr(r) for r in res.rejects],
        "kinds": sorted(res.kinds.items()),
        "accepted": res.accepted,
        "skipped": res.skipped,
    }


def record(dirs: list[Path]) -> dict[str, str]:
    found: dict[str, str] = {}
    for d in dirs:
        for path in sorted(d.glob("*.ndjson")):
            body = path.read_bytes()
            for fe in ((), FRONTEND):
                for name, allowed in KINDS.items():
                    got = orjson.dumps(reading(body, fe, allowed))
                    key = f"{path.name} frontend={'on' if fe else 'off'} kinds={name}"
                    found[key] = hashlib.sha256(got).hexdigest()
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("action", choices=("record", "compare"))
    ap.add_argument("file", type=Path)
    ap.add_argument("dirs", nargs="*", type=Path, default=list(DIRS))
    args = ap.parse_args()
    found = record(args.dirs)
    captures = len({k.split()[0] for k in found})
    if args.action == "record":
        args.file.write_bytes(orjson.dumps(found, option=orjson.OPT_INDENT_2))
        print(f"recorded {len(found)} readings of {captures} captures")
        return
    before = orjson.loads(args.file.read_bytes())
    differ = sorted(k for k in before.keys() | found.keys() if before.get(k) != found.get(k))
    for k in differ:
        print(f"DIFFERS: {k}")
    print(f"{len(found)} readings of {captures} captures; {len(differ)} differ")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
