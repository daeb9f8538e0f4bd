"""Report: the audit report of a window, built from the store, rendered, and written to files
atomically (named by the window's end date, pruned after the configured retention). Used by
`sidewatch report` and the nightly job alike."""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import astuple
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from sidewatch.app.audit import Audited, classified
from sidewatch.core.model import Verdict, WaitEvidence
from sidewatch.core.policy import Policy
from sidewatch.errors import SidewatchError
from sidewatch.report.build import IngestHealth, Retained, build_report
from sidewatch.store.repo import Store

NAME = re.compile(r"^sidewatch-report-(\d{4}-\d{2}-\d{2})\.(md|html|json)$")


def report(store: Store, policies: tuple[Policy, ...], end: int, window_ms: int) -> dict[str, Any]:
    """The audit report of the window ending at `end` (docs/reports.md). The facts are read
    once and classified at both ends of the window (`audit`, twice, read them twice)."""

    def health(start: int, stop: int) -> IngestHealth:
        return IngestHealth(*store.ingest_health(start, stop))

    start = end - window_ms
    threads = store.threads()
    return build_report(
        end,
        window_ms,
        _pairs(classified(threads, policies, end)),
        _pairs(classified(threads, policies, start)),
        store.findings(),
        health(start, end),
        health(start - window_ms, start),
        Retained(*astuple(store.retention())),
    )


def _pairs(audited: list[Audited]) -> list[tuple[WaitEvidence, Verdict]]:
    return [(a.evidence, a.verdict) for a in audited]


def render(report: dict[str, Any], fmt: str, external_url: str | None = None) -> bytes:
    """The report in `fmt` (md, html or json); with `external_url`, the HTML and Markdown
    reports link each wait to its page on the daemon."""
    # Renderers are imported here: each format's code loads only when it is asked for.
    if fmt == "json":
        return orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n"
    if fmt == "md":
        from sidewatch.report.markdown import render_markdown  # noqa: PLC0415

        return render_markdown(report, external_url).encode()
    if fmt == "html":
        from sidewatch.report.html import render_html  # noqa: PLC0415

        return render_html(report, external_url).encode()
    raise SidewatchError(f"unknown report format {fmt!r}: md, html or json")


def write_atomic(path: Path, data: bytes) -> None:
    """Readers see the old file or the new one, never half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise SidewatchError(f"cannot write {path}: {e.strerror or e}") from e


def report_name(end_ms: int, fmt: str) -> str:
    day = datetime.fromtimestamp(end_ms / 1000, UTC).strftime("%Y-%m-%d")
    return f"sidewatch-report-{day}.{fmt}"


def write_reports(
    directory: Path,
    build: Callable[[], dict[str, Any]],
    end_ms: int,
    formats: tuple[str, ...],
    retention_ms: int,
    now: float,
    external_url: str | None = None,
) -> list[Path]:
    """Write the window's report in every format, then prune reports past retention at
    `now` (epoch seconds)."""
    report = build()
    written = []
    for fmt in formats:
        path = directory / report_name(end_ms, fmt)
        write_atomic(path, render(report, fmt, external_url))
        written.append(path)
    prune(directory, retention_ms, now)
    return written


def prune(directory: Path, retention_ms: int, now: float) -> list[Path]:
    """Delete sidewatch reports whose date is older than the retention (nothing else)."""
    removed = []
    cutoff = now - retention_ms / 1000
    for path in directory.glob("sidewatch-report-*"):
        m = NAME.match(path.name)
        if m is None:
            continue
        day = datetime.strptime(m.group(1), "%Y-%m-%d").replace(tzinfo=UTC).timestamp()
        if day + 86400 <= cutoff:
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed
