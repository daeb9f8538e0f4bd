"""Ingest a unit into the store; audit every stored wait at a given time."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import astuple, dataclass
from typing import TYPE_CHECKING, Any

from sidewatch.config import Config
from sidewatch.core.engine import evaluate
from sidewatch.core.facts import ThreadFacts
from sidewatch.core.model import Verdict, WaitEvidence
from sidewatch.core.policy import Policy, select
from sidewatch.core.vocab import LineKind
from sidewatch.errors import InputError, TooLarge
from sidewatch.ingest.payload import NO_LABELS, Labels
from sidewatch.report.build import IngestHealth, Retained, build_report
from sidewatch.store.repo import RejectedLine, Store, UnitWriter

if TYPE_CHECKING:  # ag-ui's models load only where a unit is read: `audit` needs none
    from sqlalchemy import Engine

    from sidewatch.ingest.agui import Interpreter, Reject, UnitResult
    from sidewatch.ingest.digest import RefProtector
    from sidewatch.ingest.reader import Framed

log = logging.getLogger("sidewatch.auditor")


@dataclass(frozen=True, slots=True)
class IngestSummary:
    source: str
    accepted: int
    skipped: int
    rejects: tuple[Reject, ...]
    kinds: dict[str, int]
    duplicate: bool = False  # its key was already stored: nothing was stored again
    redelivered: bool = False  # every fact of it was already stored (kinds: `redelivered`)


@dataclass(frozen=True, slots=True)
class Audited:
    evidence: WaitEvidence
    verdict: Verdict


def ref_protector(engine: Engine, config: Config) -> RefProtector:
    """Hashes personal-looking approver refs with the configured key, else the store's own
    (kept apart from the store: see store.hashkey)."""
    from sidewatch.ingest.digest import RefProtector  # noqa: PLC0415 (only ingest needs it)
    from sidewatch.store.hashkey import erase_legacy_key, hash_key  # noqa: PLC0415

    if config.approver_ref_key:
        erase_legacy_key(engine)  # an earlier release's key, unused from now on
        key = config.approver_ref_key.encode()
    else:
        key = hash_key(engine, config.hash_key_file)
    return RefProtector(key, config.role_prefixes, config.keyed_digests)


def framed_unit(body: bytes, media_type: str | None, max_lines: int | None) -> Framed:
    """The unit's lines, read and counted before anything is stored: InputError when it holds
    no line, TooLarge when it has more than `max_lines`."""
    from sidewatch.ingest.reader import frame  # noqa: PLC0415 (only ingest needs it)

    framed = frame(body, media_type)
    if not framed.items and not any(line.strip() for line in framed.lines):
        raise InputError("the body holds no line to ingest")
    count = len(framed.lines) + len(framed.items)
    if max_lines is not None and count > max_lines:
        raise TooLarge(f"{count} lines, over the limit of {max_lines} a unit: split the body")
    return framed


@dataclass(frozen=True, slots=True)
class ReadUnit:
    """A unit framed and within its limits, not stored yet."""

    source: str
    framed: Framed
    received_at: int
    key: str | None = None


def ingest_unit(
    store: Store,
    source: str,
    body: bytes,
    received_at: int,
    protect: RefProtector,
    media_type: str | None = None,
    max_lines: int | None = None,
    max_line_bytes: int | None = None,
    key: str | None = None,
    labels: Labels = NO_LABELS,
) -> IngestSummary:
    """Interpret and store one unit in one transaction; bad lines are rejects, not errors.
    A unit over `max_lines` is refused whole (TooLarge), before anything is stored. A unit
    whose `key` is already stored is a duplicate: nothing is stored again."""
    framed = framed_unit(body, media_type, max_lines)
    with store.unit(source, received_at, key) as writer:
        if writer is None:
            return IngestSummary(source, 0, 0, (), {}, duplicate=True)
        return _write(
            writer, ReadUnit(source, framed, received_at, key), protect, max_line_bytes, labels
        )


def ingest_units(
    store: Store,
    units: Sequence[ReadUnit],
    protect: RefProtector,
    max_line_bytes: int | None = None,
    labels: Labels = NO_LABELS,
) -> list[IngestSummary]:
    """Store read units in ONE transaction, each as `ingest_unit` would (a key already stored,
    even earlier in the same batch, is a duplicate): all of them are committed or none. A
    StoreRefused from any of them rolls back every one."""
    with store.units() as batch:
        out: list[IngestSummary] = []
        for unit in units:
            writer = batch.unit(unit.source, unit.received_at, unit.key)
            if writer is None:
                out.append(IngestSummary(unit.source, 0, 0, (), {}, duplicate=True))
            else:
                out.append(_write(writer, unit, protect, max_line_bytes, labels))
    return out


def ingest_file(
    store: Store, path: str, received_at: int, protect: RefProtector, labels: Labels = NO_LABELS
) -> IngestSummary:
    """A file (`-`: standard input) as one unit, as `ingest_unit` stores the file's bytes. A
    plain NDJSON file is read a chunk at a time, so that its size never bounds the memory it
    takes; any other is read whole."""
    from sidewatch.ingest.reader import ndjson_file, read_file  # noqa: PLC0415

    chunks = ndjson_file(path)
    if chunks is None:
        return ingest_unit(store, path, read_file(path), received_at, protect, labels=labels)
    with store.unit(path, received_at, None) as writer:
        if writer is None:
            return IngestSummary(path, 0, 0, (), {}, duplicate=True)
        return _written(
            writer, path, received_at, protect, None, labels, lambda i: i.read_chunks(chunks)
        )


def _write(
    writer: UnitWriter,
    unit: ReadUnit,
    protect: RefProtector,
    max_line_bytes: int | None,
    labels: Labels,
) -> IngestSummary:
    return _written(
        writer,
        unit.source,
        unit.received_at,
        protect,
        max_line_bytes,
        labels,
        lambda i: i.read(unit.framed),
    )


def _written(
    writer: UnitWriter,
    source: str,
    received_at: int,
    protect: RefProtector,
    max_line_bytes: int | None,
    labels: Labels,
    read: Callable[[Interpreter], UnitResult],
) -> IngestSummary:
    """Interpret a unit's lines (`read` gives the interpreter them) into its open writer."""
    from sidewatch.ingest.agui import Interpreter  # noqa: PLC0415 (only ingest needs it)

    res = read(Interpreter(received_at, writer.seq_base, protect, max_line_bytes, labels))
    redelivered = writer.write(
        protect.digests(res.facts),
        [RejectedLine(r.line, r.reason, r.error) for r in res.rejects],
        res.kinds,
        res.accepted,
        res.skipped,
    )
    kinds: dict[str, int] = (
        {LineKind.REDELIVERED: res.accepted + res.skipped} if redelivered else dict(res.kinds)
    )
    return IngestSummary(
        source, res.accepted, res.skipped, tuple(res.rejects), kinds, redelivered=redelivered
    )


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


def audit(store: Store, policies: tuple[Policy, ...], at: int) -> list[Audited]:
    """Every known wait's verdict at `at`, ordered by when the wait was requested."""
    return classified(store.threads(), policies, at)


def classified(
    threads: Iterable[ThreadFacts], policies: tuple[Policy, ...], at: int
) -> list[Audited]:
    """The verdict at `at` of every wait of `threads` requested by then, ordered by when the
    wait was requested."""
    chosen: dict[tuple[str | None, str | None], Policy] = {}

    def policy_for(action: str | None, reason: str | None) -> Policy:
        key = (action, reason)
        if key not in chosen:  # one lookup per (action, reason), not one per wait
            chosen[key] = select(policies, action, reason)
        return chosen[key]

    out: list[Audited] = []
    for thread in threads:
        if all(i.at > at for i in thread.interrupts):
            continue  # every wait of it is requested after `at`: none is audited then
        try:
            evaluated = evaluate(thread, policy_for, at)
        except Exception as e:  # as in the auditor: one thread never fails the audit
            # The class only, no traceback: this also runs in the CLI, on a terminal.
            log.error("thread %s left out: %s", thread.thread_id, type(e).__name__)
            continue
        for w in evaluated.waits:
            if w.evidence.requested_at > at:
                continue
            if w.verdict is None:  # as in the auditor: one wait never fails the audit
                log.error("wait %s left out: %s", w.evidence.request_id, type(w.error).__name__)
                continue
            out.append(Audited(w.evidence, w.verdict))
    out.sort(key=lambda a: (a.evidence.requested_at, a.evidence.requested_seq))
    return out
