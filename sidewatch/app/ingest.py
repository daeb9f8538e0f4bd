"""Ingest: a unit (an HTTP body, a JetStream message, a file) undone from gzip, framed and
counted within the limits, interpreted and committed in one transaction. The one path of
HTTP, JetStream and the CLI alike."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict, Unpack

from sidewatch.config import Config
from sidewatch.core.vocab import LineKind
from sidewatch.errors import InputError, TooLarge
from sidewatch.exporters.snapshot import IngestCounters
from sidewatch.ingest.opencalls import OpenCalls
from sidewatch.ingest.reader import NDJSON_TYPES, Framed, frame, ndjson_file, read_file
from sidewatch.store.repo import RejectedLine, Store, UnitWriter

if TYPE_CHECKING:  # ag-ui's models load only where a unit is read: `audit` needs none
    from sqlalchemy import Engine

    from sidewatch.ingest.agui import Reject
    from sidewatch.ingest.digest import RefProtector

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


class Sent(TypedDict, total=False):
    """How a unit was sent, besides its bytes: its media type (absent or None: sniffed), its
    encoding (`identity` unless `gzip`), its key (a unit whose key is already stored is a
    duplicate) and the kinds of line its sender may send (its token's `kinds`; absent or None:
    every kind, as JetStream and files)."""

    media_type: str | None
    encoding: str
    key: str | None
    allowed: frozenset[str] | None


@dataclass(frozen=True, slots=True)
class ReadUnit:
    """A unit framed and within its limits, not stored yet; `allowed`: the kinds of line its
    sender may send (its token's `kinds`; None: every kind, as JetStream and files)."""

    source: str
    framed: Framed
    received_at: int
    key: str | None = None
    allowed: frozenset[str] | None = None


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


class Ingest:
    """The ingest use case, the one door of HTTP, JetStream, the CLI and the tests (blocking:
    the daemon runs it in a worker thread). Built once per daemon or command with what is
    fixed there (the store, how refs are protected, the config, the counters); each call takes
    a unit. A unit is taken within the limits of `config` (replaced on a reload: the next unit
    takes the new one) and read with its decision labels and frontend tools, committed in one
    transaction, then its lines counted in `counters`. Bad lines are rejects, not errors (a
    line of a kind not in the unit's `allowed`, too). Raises InputError (unreadable), TooLarge
    (more lines than server.maxLinesPerUnit, or inflating past server.maxInflatedBytes:
    refused whole), StoreRefused (the store refused its data) or StoreError (store
    unavailable); each time nothing was stored. A unit whose `key` is already stored is a
    duplicate: nothing is stored again."""

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
        # Tool calls a unit left open, for their parts in later units (memory only).
        self.open_calls = OpenCalls()
        # SQLite has one writer: units are committed one at a time (PostgreSQL needs no lock).
        sqlite = store.engine.dialect.name == "sqlite"
        self._writer: AbstractContextManager[object] = threading.Lock() if sqlite else nullcontext()

    @property
    def limits(self) -> UnitLimits:
        return UnitLimits.of(self.config)

    def read(self, source: str, body: bytes, received_at: int, **sent: Unpack[Sent]) -> ReadUnit:
        """A unit undone from gzip and framed within the limits, not stored yet; raises
        InputError or TooLarge (nothing touches the store). A line of a kind its sender may
        not send is rejected (`kind_not_allowed`) when the unit is stored, the rest stored as
        usual."""
        limits = self.limits
        media, encoding = sent.get("media_type"), sent.get("encoding", "identity")
        framed = framed_unit(body, media, limits.lines, encoding, limits.inflated_bytes)
        return ReadUnit(source, framed, received_at, sent.get("key"), sent.get("allowed"))

    def body(
        self, source: str, body: bytes, received_at: int, **sent: Unpack[Sent]
    ) -> IngestSummary:
        """A body (an HTTP request's, a message's) read as `read` does and committed as `unit`
        does."""
        return self.unit(self.read(source, body, received_at, **sent))

    def unit(self, unit: ReadUnit) -> IngestSummary:
        """One unit (as `read` gives it) committed in a transaction of its own, and counted."""
        settle: list[Callable[[], None]] = []
        with self._writer, self.store.unit(unit.source, unit.received_at, unit.key) as writer:
            summary = self._stored(writer, unit, settle, self.open_calls)
        for settled in settle:  # committed: its open calls are held for the next units
            settled()
        return self._counted(summary)

    def units(self, units: Sequence[ReadUnit]) -> list[IngestSummary]:
        """Read units committed in ONE transaction, each as `unit` would (a key already stored,
        even earlier in the same batch, is a duplicate), then counted: all of them are
        committed or none. A StoreRefused from any of them rolls back every one."""
        settle: list[Callable[[], None]] = []
        calls = self.open_calls.fork()  # each unit of the batch sees the calls of those before
        with self._writer, self.store.units() as batch:
            summaries: list[IngestSummary] = []
            for unit in units:
                writer = batch.unit(unit.source, unit.received_at, unit.key)
                summaries.append(self._stored(writer, unit, settle, calls))
        for settled in settle:
            settled()
        return [self._counted(s) for s in summaries]

    def file(self, path: str, received_at: int) -> IngestSummary:
        """A file (`-`: standard input) as one unit, as `body` stores the file's bytes, within
        the same limits. A plain NDJSON file is read a chunk at a time, so that its size never
        bounds the memory it takes; any other is read whole. Every kind of line is allowed:
        a file holds whatever its reader may send."""
        limits = self.limits
        chunks = ndjson_file(path)
        lines: Framed | Iterator[list[bytes]]
        if chunks is None:
            body = read_file(path)
            try:
                lines = framed_unit(body, None, limits.lines, max_inflated=limits.inflated_bytes)
            except InputError as e:  # named by its file, as every error of a file is
                raise type(e)(f"{path}: {e}") from None
        else:
            lines = _counted(chunks, limits.lines, path)
        settle: list[Callable[[], None]] = []
        with self._writer, self.store.unit(path, received_at, None) as writer:
            summary = (
                _duplicate(path)
                if writer is None
                else self._interpreted(
                    writer, path, received_at, None, lines, settle, self.open_calls
                )
            )
        for settled in settle:
            settled()
        return self._counted(summary)

    def _stored(
        self,
        writer: UnitWriter | None,
        unit: ReadUnit,
        settle: list[Callable[[], None]],
        calls: OpenCalls,
    ) -> IngestSummary:
        """A read unit into its writer (None: its key is stored already, a duplicate)."""
        if writer is None:
            return _duplicate(unit.source)
        return self._interpreted(
            writer, unit.source, unit.received_at, unit.allowed, unit.framed, settle, calls
        )

    def _interpreted(
        self,
        writer: UnitWriter,
        source: str,
        received_at: int,
        allowed: frozenset[str] | None,
        lines: Framed | Iterator[list[bytes]],
        settle: list[Callable[[], None]],
        calls: OpenCalls,
    ) -> IngestSummary:
        """Interpret a unit's lines (framed, or a file's chunks) into its open writer, refusing
        those of a kind not in `allowed` (None: every kind allowed). It reads the open `calls`
        (a batch's fork, settled at once); what it does to the daemon's goes to `settle`, to
        be done once the unit is committed."""
        from sidewatch.ingest.agui import Interpreter  # noqa: PLC0415 (only ingest needs it)

        cfg, protect = self.config, self.protect
        interpreter = Interpreter(
            received_at,
            writer.seq_base,
            protect,
            cfg.max_line_bytes,
            cfg.decision_labels,
            cfg.frontend_tools,
            allowed,
            calls,
        )
        res = (
            interpreter.read(lines) if isinstance(lines, Framed) else interpreter.read_chunks(lines)
        )
        took, left = interpreter.took, interpreter.left
        if calls is not self.open_calls:
            calls.settle(took, left)
        settle.append(lambda: self.open_calls.settle(took, left))
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

    def _counted(self, summary: IngestSummary) -> IngestSummary:
        self.counters.add(summary.kinds, Counter(r.reason for r in summary.rejects))
        return summary


def _duplicate(source: str) -> IngestSummary:
    """What a unit whose key is already stored comes to: nothing stored again."""
    return IngestSummary(source, 0, 0, (), {}, duplicate=True)
