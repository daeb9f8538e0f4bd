"""Ingest a unit into the store; audit every stored wait at a given time."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sidewatch.config import Config
from sidewatch.core.engine import evaluate
from sidewatch.core.model import Verdict, WaitEvidence
from sidewatch.core.policy import Policy, select
from sidewatch.core.vocab import LineKind
from sidewatch.errors import InputError, TooLarge
from sidewatch.ingest.payload import NO_LABELS, Labels
from sidewatch.report.build import IngestHealth, build_report
from sidewatch.store.repo import RejectedLine, Store

if TYPE_CHECKING:  # ag-ui's models load only where a unit is read: `audit` needs none
    from sqlalchemy import Engine

    from sidewatch.ingest.agui import Reject
    from sidewatch.ingest.digest import RefProtector

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
    from sidewatch.ingest.agui import Interpreter  # noqa: PLC0415 (only ingest needs it)
    from sidewatch.ingest.reader import frame  # noqa: PLC0415

    framed = frame(body, media_type)
    if not framed.items and not any(line.strip() for line in framed.lines):
        raise InputError("the body holds no line to ingest")
    count = len(framed.lines) + len(framed.items)
    if max_lines is not None and count > max_lines:
        raise TooLarge(f"{count} lines, over the limit of {max_lines} a unit: split the body")
    with store.unit(source, received_at, key) as writer:
        if writer is None:
            return IngestSummary(source, 0, 0, (), {}, duplicate=True)
        interpreter = Interpreter(received_at, writer.seq_base, protect, max_line_bytes, labels)
        res = interpreter.read(framed)
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
    """The audit report of the window ending at `end` (docs/reports.md)."""

    def pairs(at: int) -> list[tuple[WaitEvidence, Verdict]]:
        return [(a.evidence, a.verdict) for a in audit(store, policies, at)]

    def health(start: int, stop: int) -> IngestHealth:
        return IngestHealth(*store.ingest_health(start, stop))

    start = end - window_ms
    return build_report(
        end,
        window_ms,
        pairs(end),
        pairs(start),
        store.findings(),
        health(start, end),
        health(start - window_ms, start),
    )


def audit(store: Store, policies: tuple[Policy, ...], at: int) -> list[Audited]:
    """Every known wait's verdict at `at`, ordered by when the wait was requested."""

    def policy_for(action: str | None, reason: str | None) -> Policy:
        return select(policies, action, reason)

    out: list[Audited] = []
    for thread in store.threads():
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
