"""Ingest: a unit (an HTTP body, a JetStream message, a file) undone from gzip, framed and
counted within the limits, interpreted and committed in one transaction. The one path of
HTTP, JetStream and the CLI alike."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sidewatch.config import Config
from sidewatch.core.vocab import LineKind
from sidewatch.errors import InputError, TooLarge
from sidewatch.exporters.snapshot import IngestCounters
from sidewatch.ingest.payload import NO_LABELS, Labels
from sidewatch.ingest.reader import NDJSON_TYPES, frame, ndjson_file, read_file
from sidewatch.store.repo import RejectedLine, Store, UnitWriter

if TYPE_CHECKING:  # ag-ui's models load only where a unit is read: `audit` needs none
    from sqlalchemy import Engine

    from sidewatch.ingest.agui import Interpreter, Reject, UnitResult
    from sidewatch.ingest.digest import RefProtector
    from sidewatch.ingest.reader import Framed

# What a unit may be sent as (HTTP's Content-Type, a JetStream message's header).
MEDIA_TYPES = {*NDJSON_TYPES, "application/json", "text/event-stream", "text/plain"}


@dataclass(frozen=True, slots=True)
class IngestSummary:
    source: str
    accepted: int
    skipped: int
    rejects: tuple[Reject, ...]
    kinds: dict[str, int]
    duplicate: bool = False  # its key was already stored: nothing was stored again
    redelivered: bool = False  # every fact of it was already stored (kinds: `redelivered`)


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


def media_and_encoding(
    content_type: str | None, content_encoding: str | None
) -> tuple[str | None, str] | str:
    """The unit's media type (None: sniffed) and encoding from its headers, or why they are
    not supported (HTTP's 415)."""
    media = (content_type or "").split(";")[0].strip().lower() or None
    if media is not None and media not in MEDIA_TYPES:
        return (
            f"unsupported media type {media!r}; send application/x-ndjson, "
            "application/json or text/event-stream"
        )
    encoding = (content_encoding or "identity").strip().lower()
    if encoding not in ("identity", "gzip"):
        return f"unsupported content encoding {encoding!r}; send gzip or none"
    return (None if media == "text/plain" else media), encoding


@dataclass(frozen=True, slots=True)
class UnitLimits:
    """What one unit may hold, on every path: bytes once gzip is undone, lines, and bytes a
    line (a longer line is a `too_long` reject). None: no limit."""

    inflated_bytes: int | None = None
    lines: int | None = None
    line_bytes: int | None = None

    @classmethod
    def of(cls, config: Config) -> UnitLimits:
        """server.maxInflatedBytes, server.maxLinesPerUnit and server.maxLineBytes."""
        return cls(config.max_inflated_bytes, config.max_lines_per_unit, config.max_line_bytes)


def framed_unit(
    body: bytes,
    media_type: str | None,
    max_lines: int | None,
    encoding: str = "identity",
    max_inflated: int | None = None,
) -> Framed:
    """The unit's lines, undone from gzip (within `max_inflated` bytes), read and counted
    before anything is stored: InputError when it holds no line, TooLarge when it inflates
    past `max_inflated` or has more than `max_lines`."""
    framed = frame(body, media_type, encoding, max_inflated)
    if not framed.items and not any(line.strip() for line in framed.lines):
        raise InputError("the body holds no line to ingest")
    count = len(framed.lines) + len(framed.items)
    if max_lines is not None and count > max_lines:
        raise TooLarge(f"{count} lines, over the limit of {max_lines} a unit: split the body")
    return framed


@dataclass(frozen=True, slots=True)
class ReadUnit:
    """A unit framed and within its limits, not stored yet; `allowed`: the kinds of line its
    sender may send (its token's `kinds`; None: every kind, as JetStream and files)."""

    source: str
    framed: Framed
    received_at: int
    key: str | None = None
    allowed: frozenset[str] | None = None


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
    encoding: str = "identity",
    max_inflated: int | None = None,
    frontend_tools: Sequence[str] = (),
    allowed: frozenset[str] | None = None,
) -> IngestSummary:
    """Interpret and store one unit in one transaction; bad lines are rejects, not errors
    (a line of a kind not in `allowed`, when given, too). A unit over `max_lines` (or
    inflating past `max_inflated` bytes) is refused whole (TooLarge), before anything is
    stored. A unit whose `key` is already stored is a duplicate: nothing is stored again."""
    framed = framed_unit(body, media_type, max_lines, encoding, max_inflated)
    unit = ReadUnit(source, framed, received_at, key, allowed)
    return _commit(store, unit, _Reading(protect, max_line_bytes, labels, frontend_tools))


def _commit(store: Store, unit: ReadUnit, how: _Reading) -> IngestSummary:
    """A read unit interpreted and stored in one transaction (a duplicate if its key is)."""
    with store.unit(unit.source, unit.received_at, unit.key) as writer:
        if writer is None:
            return IngestSummary(unit.source, 0, 0, (), {}, duplicate=True)
        return _write(writer, unit, how)


def ingest_units(
    store: Store,
    units: Sequence[ReadUnit],
    protect: RefProtector,
    max_line_bytes: int | None = None,
    labels: Labels = NO_LABELS,
    frontend_tools: Sequence[str] = (),
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
                how = _Reading(protect, max_line_bytes, labels, frontend_tools)
                out.append(_write(writer, unit, how))
    return out


def ingest_file(
    store: Store,
    path: str,
    received_at: int,
    protect: RefProtector,
    labels: Labels = NO_LABELS,
    limits: UnitLimits = UnitLimits(),
    frontend_tools: Sequence[str] = (),
) -> IngestSummary:
    """A file (`-`: standard input) as one unit, as `ingest_unit` stores the file's bytes,
    within the same `limits`. A plain NDJSON file is read a chunk at a time, so that its size
    never bounds the memory it takes; any other is read whole."""
    chunks = ndjson_file(path)
    read: Callable[[Interpreter], UnitResult]
    if chunks is None:
        body = read_file(path)
        try:
            framed = framed_unit(body, None, limits.lines, max_inflated=limits.inflated_bytes)
        except InputError as e:  # named by its file, as every error of a file is
            raise type(e)(f"{path}: {e}") from None
        read = lambda i: i.read(framed)  # noqa: E731 (one of two readers, chosen here)
    else:
        counted = _counted(chunks, limits.lines, path)
        read = lambda i: i.read_chunks(counted)  # noqa: E731
    with store.unit(path, received_at, None) as writer:
        if writer is None:
            return IngestSummary(path, 0, 0, (), {}, duplicate=True)
        return _written(
            writer,
            path,
            received_at,
            protect,
            limits.line_bytes,
            labels,
            frontend_tools,
            None,  # a file holds whatever its reader may send: every kind
            read,
        )


def _counted(chunks: Iterator[list[bytes]], limit: int | None, path: str) -> Iterator[list[bytes]]:
    """The chunks, refused (TooLarge, the unit's transaction rolled back) once they hold more
    than `limit` lines: the limit a body has, on a file read a chunk at a time."""
    count = 0
    for chunk in chunks:
        count += len(chunk)
        if limit is not None and count > limit:
            # Not read to its end to be counted: how many lines it holds is not known.
            raise TooLarge(
                f"{path}: over the limit of {limit} lines a unit: split the file, "
                "or raise server.maxLinesPerUnit"
            )
        yield chunk


@dataclass(frozen=True, slots=True)
class _Reading:
    """How a unit's lines are read: refs protected, the line limit, labels, frontend tools."""

    protect: RefProtector
    max_line_bytes: int | None
    labels: Labels
    frontend_tools: Sequence[str]


def _write(writer: UnitWriter, unit: ReadUnit, how: _Reading) -> IngestSummary:
    return _written(
        writer,
        unit.source,
        unit.received_at,
        how.protect,
        how.max_line_bytes,
        how.labels,
        how.frontend_tools,
        unit.allowed,
        lambda i: i.read(unit.framed),
    )


def _written(
    writer: UnitWriter,
    source: str,
    received_at: int,
    protect: RefProtector,
    max_line_bytes: int | None,
    labels: Labels,
    frontend_tools: Sequence[str],
    allowed: frozenset[str] | None,
    read: Callable[[Interpreter], UnitResult],
) -> IngestSummary:
    """Interpret a unit's lines (`read` gives the interpreter them) into its open writer,
    refusing those of a kind not in `allowed` (None: every kind allowed)."""
    from sidewatch.ingest.agui import Interpreter  # noqa: PLC0415 (only ingest needs it)

    res = read(
        Interpreter(
            received_at, writer.seq_base, protect, max_line_bytes, labels, frontend_tools, allowed
        )
    )
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


class Ingest:
    """The ingest use case of HTTP, JetStream and the CLI (blocking: the daemon runs it in a
    worker thread). Each unit is taken within the limits of `config` (replaced on a reload:
    the next unit takes the new one), committed, then its lines counted in `counters`.
    Raises InputError (unreadable), TooLarge, StoreRefused (the store refused its data) or
    StoreError (store unavailable); each time nothing was stored."""

    def __init__(
        self,
        store: Store,
        protect: RefProtector,
        config: Config,
        counters: IngestCounters | None = None,
    ) -> None:
        self.store = store
        self.protect = protect
        self.config = config
        self.counters = IngestCounters() if counters is None else counters
        # SQLite has one writer: units are committed one at a time (PostgreSQL needs no lock).
        sqlite = store.engine.dialect.name == "sqlite"
        self._writer: AbstractContextManager[object] = threading.Lock() if sqlite else nullcontext()

    @property
    def limits(self) -> UnitLimits:
        return UnitLimits.of(self.config)

    def read(
        self,
        source: str,
        body: bytes,
        media_type: str | None,
        encoding: str,
        received_at: int,
        key: str | None = None,
        allowed: frozenset[str] | None = None,
    ) -> ReadUnit:
        """A unit undone from gzip and framed within the limits, not stored yet; raises
        InputError or TooLarge (nothing touches the store). `allowed`: the kinds of line its
        sender may send (its token's; None: every kind); a line of another is rejected
        (`kind_not_allowed`) when the unit is stored, and the rest stored as usual."""
        limits = self.limits
        framed = framed_unit(body, media_type, limits.lines, encoding, limits.inflated_bytes)
        return ReadUnit(source, framed, received_at, key, allowed)

    def unit(self, unit: ReadUnit) -> IngestSummary:
        """One unit (as `read` gives it) committed in a transaction of its own, and counted
        (see `ingest_unit`)."""
        cfg = self.config
        with self._writer:
            how = _Reading(
                self.protect, cfg.max_line_bytes, cfg.decision_labels, cfg.frontend_tools
            )
            summary = _commit(self.store, unit, how)
        return self._counted(summary)

    def units(self, units: Sequence[ReadUnit]) -> list[IngestSummary]:
        """Read units committed in ONE transaction, then counted (see `ingest_units`)."""
        cfg = self.config
        with self._writer:
            summaries = ingest_units(
                self.store,
                units,
                self.protect,
                cfg.max_line_bytes,
                cfg.decision_labels,
                cfg.frontend_tools,
            )
        return [self._counted(s) for s in summaries]

    def file(self, path: str, received_at: int) -> IngestSummary:
        """A file (`-`: standard input) as one unit, within the same limits as a body."""
        with self._writer:
            summary = ingest_file(
                self.store,
                path,
                received_at,
                self.protect,
                self.config.decision_labels,
                self.limits,
                self.config.frontend_tools,
            )
        return self._counted(summary)

    def _counted(self, summary: IngestSummary) -> IngestSummary:
        self.counters.add(summary.kinds, Counter(r.reason for r in summary.rejects))
        return summary
