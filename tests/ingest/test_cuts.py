"""However a stream is cut into units (per N lines, a line a body, each event naming its run as
`input.md` asks), every producer capture gives the verdicts, evidence and findings of its
whole-stream ingest: a tool call is keyed by (threadId, toolCallId) across units."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import orjson
import pytest

from sidewatch.app.audit import audit
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store
from tests.ingest.producers.captures import CAPTURES, NOW, QUIET

# What a run's end decides of what came before it is held across units (`ingest/openruns.py`:
# `on_interrupt` events, crewai's pauses, a frontend tool's calls), and an input with no time
# stored before its run's `RUN_STARTED` takes the run's start time when it comes
# (`ingest/untimed.py`, `store/retime.py`). A part of a capture's name: why its cuts differ.
NOT_YET: dict[str, str] = {}
# The captures of those that every cut reads alike already.
SAME: set[str] = set()
FIXTURES = [
    pytest.param(
        name,
        marks=[
            pytest.mark.xfail(reason=why, strict=True)
            for part, why in NOT_YET.items()
            if part in name and name not in SAME
        ][:1],
    )
    for name in sorted(p.stem for p in CAPTURES.glob("*.ndjson"))
]
# Frontend tools on: the frontend-tool captures hold their waits only then.
CONFIG = Config(frontend_tools=("confirm_*",))
# Every size from a line a body up to a few lines, and a few larger ones.
SIZES = (1, 2, 3, 4, 5, 7, 16)


def named(body: bytes) -> list[bytes]:
    """The stream's lines, each AG-UI event naming the run it belongs to (the run of the
    latest input or RUN_STARTED before it), as a sender cutting it anywhere must."""
    out, ctx = [], None
    for line in filter(bytes.strip, body.splitlines()):
        obj = orjson.loads(line)
        if isinstance(obj.get("threadId"), str) and isinstance(obj.get("runId"), str):
            ctx = (obj["threadId"], obj["runId"])
            out.append(line)
        elif "type" in obj and "runId" not in obj and ctx is not None:
            out.append(orjson.dumps({**obj, "threadId": ctx[0], "runId": ctx[1]}))
        else:
            out.append(line)
    return out


def unseq(value: Any) -> Any:
    """A record as plain data without its arrival numbers (`seq`), which depend on the units."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: unseq(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if not f.name.endswith("seq")
        }
    if isinstance(value, tuple | list):
        return [unseq(v) for v in value]
    if isinstance(value, dict):
        return {k: unseq(v) for k, v in value.items()}
    return value


def renamed(lines: list[bytes], mark: str) -> list[bytes]:
    """The lines with every thread id (and any id spelled after one) marked `mark~`: each cut
    of a capture lives on threads of its own, in one store."""
    threads = {orjson.loads(x).get("threadId") for x in lines} - {None}
    out = []
    for line in lines:
        for thread in threads:
            line = line.replace(b'"' + thread.encode(), b'"' + f"{mark}~{thread}".encode())  # noqa: PLW2901
        out.append(line)
    return out


def unmarked(value: Any, mark: str) -> Any:
    """`unseq`'s data with `mark~` taken out of every string."""
    if isinstance(value, str):
        return value.replace(f"{mark}~", "")
    if isinstance(value, list | tuple):
        return [unmarked(v, mark) for v in value]
    if isinstance(value, dict):
        return {k: unmarked(v, mark) for k, v in value.items()}
    return value


def outcomes(url: str, cuts: dict[str, list[bytes]], received: int) -> dict[str, Any]:
    """For each cut (its mark: its units, on threads of its own), every wait's evidence and
    verdict and every finding, its units sent one after the other to one daemon's ingest."""
    engine = open_store(url)
    store = Store(engine)
    for units in cuts.values():
        ingest = Ingest(store, ref_protector(engine, CONFIG), CONFIG)
        for unit in units:
            assert () == ingest.body("producer", unit, received).rejects
    waits = [
        (unseq(a.evidence), unseq(a.verdict)) for a in audit(store, (QUIET,), received + 60_000)
    ]
    findings = [
        (f.rule, f.thread_id, f.run_id, f.interrupt_id, f.at)
        for t in store.threads()
        for f in t.findings
    ]
    engine.dispose()
    return {
        mark: (
            unmarked([w for w in waits if w[0]["thread_id"].startswith(f"{mark}~")], mark),
            sorted(unmarked([f for f in findings if f[1].startswith(f"{mark}~")], mark)),
        )
        for mark in cuts
    }


@pytest.mark.parametrize("name", FIXTURES)
def test_a_capture_cut_anywhere_gives_its_whole_stream_verdicts(db_url: str, name: str) -> None:
    body = (CAPTURES / f"{name}.ndjson").read_bytes()
    stamps = [int(t) for t in re.findall(rb'"timestamp":(\d+)', body)]
    received = max([*stamps, NOW - 60_000]) + 1_000
    lines = named(body)
    cuts = {"whole": [b"\n".join(renamed(body.splitlines(), "whole")) + b"\n"]}
    for size in (*SIZES, len(lines)):
        mine = renamed(lines, f"cut{size}")
        cuts[f"cut{size}"] = [
            b"\n".join(mine[i : i + size]) + b"\n" for i in range(0, len(mine), size)
        ]

    found = outcomes(db_url, cuts, received)

    for size in (*SIZES, len(lines)):
        assert found["whole"] == found[f"cut{size}"], f"cut every {size} lines"
