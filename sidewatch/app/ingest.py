"""Ingest: a unit (an HTTP body, a JetStream message, a file) undone from gzip, framed and
counted within the limits, interpreted and committed in one transaction. The one path of
HTTP, JetStream and the CLI alike."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TypedDict, Unpack

from sidewatch.config import Config
from sidewatch.core.vocab import LineKind
from sidewatch.errors import InputError, TooLarge
from sidewatch.exporters.snapshot import IngestCounters
from sidewatch.ingest.opencalls import OpenCalls
from sidewatch.ingest.openruns import OpenRuns
from sidewatch.ingest.reader import (
    NDJSON_TYPES,
    FileCuts,
    Framed,
    NdjsonFile,
    frame,
    ndjson_file,
    read_file,
)
from sidewatch.store.repo import RejectedLine, Store, UnitWriter

if TYPE_CHECKING:  # ag-ui's models load only where a unit is read: `audit` needs none
    from sqlalchemy import Engine

    from sidewatch.ingest.agui import Interpreter, Reject, UnitResult
    from sidewatch.ingest.digest import RefProtector

# What a unit may be sent as (HTTP's Content-Type, a JetStream message's header).
MEDIA_TYPES = {*NDJSON_TYPES, "application/json", "text/event-stream", "text/plain"}
# A file streamed is committed a unit of this many lines at a time at most (fewer under a
# lower server.maxLinesPerUnit): a unit's facts are what a file's reading holds in memory.
FILE_UNIT_LINES = 50_000
# The rejects a file's summary holds: a file of any size is read in bounded memory, so the
# rest are only counted (`IngestSummary.more_rejected`).
FILE_REJECTS_KEPT = 1000
# Told after each unit of a file is committed: its lines so far, and its bytes read so far.
Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class IngestSummary:
    source: str
    accepted: int
    skipped: int
    rejects: tuple[Reject, ...]
    kinds: dict[str, int]
    duplicate: bool = False  # its key was already stored: nothing was stored again
    redelivered: bool = False  # every fact of it was already stored (kinds: `redelivered`)
    # Rejected lines counted but not in `rejects`: a file's summary holds its first
    # FILE_REJECTS_KEPT (every one is stored, in the `reject` table, with its unit and line).
    more_rejected: int = 0

    @property
    def rejected(self) -> int:
        """Every line rejected, whether its reject is held here or only counted."""
        return len(self.rejects) + self.more_rejected


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
        # What the dialects hold for a run's end that a later unit may bring (memory only).
        self.open_runs = OpenRuns()
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
            summary = self._stored(writer, unit, settle, self.open_calls, self.open_runs)
        for settled in settle:  # committed: its open calls are held for the next units
            settled()
        return self._counted(summary)

    def units(self, units: Sequence[ReadUnit]) -> list[IngestSummary]:
        """Read units committed in ONE transaction, each as `unit` would (a key already stored,
        even earlier in the same batch, is a duplicate), then counted: all of them are
        committed or none. A StoreRefused from any of them rolls back every one."""
        settle: list[Callable[[], None]] = []
        calls = self.open_calls.fork()  # each unit of the batch sees the calls of those before
        runs = self.open_runs.fork()  # and what their runs hold
        with self._writer, self.store.units() as batch:
            summaries: list[IngestSummary] = []
            for unit in units:
                writer = batch.unit(unit.source, unit.received_at, unit.key)
                summaries.append(self._stored(writer, unit, settle, calls, runs))
        for settled in settle:
            settled()
        return [self._counted(s) for s in summaries]

    def file(self, path: str, received_at: int, progress: Progress | None = None) -> IngestSummary:
        """A file (`-`: standard input). Plain NDJSON, gzipped or not, is a stream of any
        size: read a chunk at a time and committed a unit of about server.maxLinesPerUnit
        lines at a time (`streamed`), so that neither memory nor the line limit bounds it. Any
        other form is one unit, read whole within the limits a body has. Every kind of line
        is allowed: a file holds whatever its reader may send. `progress` is called after
        each unit committed."""
        stream = ndjson_file(path)
        if stream is not None:
            return self.streamed(path, received_at, stream, progress)
        limits = self.limits
        body = read_file(path)
        try:
            framed = framed_unit(body, None, limits.lines, max_inflated=limits.inflated_bytes)
        except InputError as e:  # named by its file, as every error of a file is
            raise type(e)(f"{path}: {e}") from None
        summary = self.unit(ReadUnit(path, framed, received_at))
        if progress is not None:
            progress(len(framed.lines) + len(framed.items), len(body))
        return summary

    def streamed(
        self,
        path: str,
        received_at: int,
        stream: NdjsonFile,
        progress: Progress | None = None,
    ) -> IngestSummary:
        """A plain NDJSON file's lines (a chunk at a time) committed a unit at a time, each
        unit in a transaction of its own, cut as `FileCuts` cuts them: after a run's end with
        no tool call open, so that a unit reads as a sender's body of whole runs would. A unit
        refused or failing leaves the units before it stored: the same file ingested again
        stores the rest (its facts' keys make the stored part a redelivery). The summary is
        the units' together, rejects by their line in the file."""
        size = min(self.limits.lines or FILE_UNIT_LINES, FILE_UNIT_LINES)
        cuts = FileCuts(stream, size)
        together = _Together(path)
        with stream:
            while cuts.more():
                offset = cuts.line
                settle: list[Callable[[], None]] = []
                with self._writer, self.store.unit(path, received_at, None) as writer:
                    assert writer is not None  # a unit without a key is never a duplicate
                    interpreter = self._interpreter(
                        writer, received_at, None, self.open_calls, self.open_runs
                    )
                    res = interpreter.read_chunks(cuts.unit(interpreter.calls))
                    self._held(interpreter, self.open_calls, self.open_runs, settle)
                    summary = self._written(writer, path, res, offset)
                for settled in settle:
                    settled()
                together.add(self._counted(summary))
                if progress is not None:
                    progress(cuts.line, stream.position)
        return together.summary()

    def close_held(self, source: str, received_at: int) -> IngestSummary | None:
        """What the units' dialects still hold for a run's end that has not come (`open_runs`),
        closed in a unit of its own as if each stream ended there (an `on_interrupt` event is
        announced by what it says alone): when no later unit can bring those ends, at the end
        of `sidewatch ingest` or when the daemon stops (its memory is lost). None: nothing was
        held."""
        if not len(self.open_runs):
            return None
        settle: list[Callable[[], None]] = []
        with self._writer, self.store.unit(source, received_at, None) as writer:
            assert writer is not None  # a unit without a key is never a duplicate
            interpreter = self._interpreter(
                writer, received_at, None, self.open_calls, self.open_runs, closing=True
            )
            res = interpreter.read_chunks([])
            self._held(interpreter, self.open_calls, self.open_runs, settle)
            summary = self._written(writer, source, res)
        for settled in settle:
            settled()
        return self._counted(summary)

    def _stored(
        self,
        writer: UnitWriter | None,
        unit: ReadUnit,
        settle: list[Callable[[], None]],
        calls: OpenCalls,
        runs: OpenRuns,
    ) -> IngestSummary:
        """A read unit into its writer (None: its key is stored already, a duplicate), reading
        the open `calls` and `runs`; see `_held` for `settle`."""
        if writer is None:
            return _duplicate(unit.source)
        interpreter = self._interpreter(writer, unit.received_at, unit.allowed, calls, runs)
        res = interpreter.read(unit.framed)
        self._held(interpreter, calls, runs, settle)
        return self._written(writer, unit.source, res)

    def _held(
        self,
        interpreter: Interpreter,
        calls: OpenCalls,
        runs: OpenRuns,
        settle: list[Callable[[], None]],
    ) -> None:
        """What a unit did to the open tool calls (took some, left some open) and to what its
        runs hold: done at once to `calls` and `runs` when they are a batch's forks, and put in
        `settle` for the daemon's own, to be done once the unit is committed (a unit rolled
        back leaves them as they were)."""
        took, left = interpreter.took, interpreter.left
        held, kept = interpreter.hold.took, list(interpreter.hold.left.items())
        if calls is not self.open_calls:
            calls.settle(took, left)
        if runs is not self.open_runs:
            runs.settle(held, kept)

        def settled() -> None:
            self.open_calls.settle(took, left)
            self.open_runs.settle(held, kept)

        settle.append(settled)

    def _interpreter(
        self,
        writer: UnitWriter,
        received_at: int,
        allowed: frozenset[str] | None,
        calls: OpenCalls,
        runs: OpenRuns,
        closing: bool = False,
    ) -> Interpreter:
        """The interpreter of a unit for its open writer, refusing lines of a kind not in
        `allowed` (None: every kind allowed), reading the tool calls earlier units left open
        and what their runs hold."""
        from sidewatch.ingest.agui import Interpreter  # noqa: PLC0415 (only ingest needs it)

        cfg = self.config
        return Interpreter(
            received_at,
            writer.seq_base,
            self.protect,
            cfg.max_line_bytes,
            cfg.decision_labels,
            cfg.frontend_tools,
            allowed,
            calls,
            runs,
            closing,
        )

    def _written(
        self, writer: UnitWriter, source: str, res: UnitResult, offset: int = 0
    ) -> IngestSummary:
        """A unit's reading written into its open writer; its rejects numbered `offset` lines
        on (the lines of a file before the unit)."""
        rejects = [replace(r, line=r.line + offset) for r in res.rejects] if offset else res.rejects
        redelivered = writer.write(
            self.protect.digests(res.facts),
            [RejectedLine(r.line, r.reason, r.error) for r in rejects],
            res.kinds,
            res.accepted,
            res.skipped,
            [(r.thread_id, r.run_id, r.at) for r in res.retimes],
        )
        kinds: dict[str, int] = (
            {LineKind.REDELIVERED: res.accepted + res.skipped} if redelivered else dict(res.kinds)
        )
        return IngestSummary(
            source, res.accepted, res.skipped, tuple(rejects), kinds, redelivered=redelivered
        )

    def _counted(self, summary: IngestSummary) -> IngestSummary:
        self.counters.add(summary.kinds, Counter(r.reason for r in summary.rejects))
        return summary


class _Together:
    """The summary of a file committed in several units, gathered a unit at a time: every
    line of them counted once (a unit redelivered under `redelivered`), redelivered when every
    unit was, and its first FILE_REJECTS_KEPT rejects (the rest counted)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.accepted = self.skipped = self.more_rejected = self.units = 0
        self.rejects: list[Reject] = []
        self.kinds: Counter[str] = Counter()
        self.redelivered = True

    def add(self, part: IngestSummary) -> None:
        self.units += 1
        self.accepted += part.accepted
        self.skipped += part.skipped
        self.kinds.update(part.kinds)
        room = max(0, FILE_REJECTS_KEPT - len(self.rejects))
        self.rejects.extend(part.rejects[:room])
        self.more_rejected += part.rejected - min(room, len(part.rejects))
        self.redelivered = self.redelivered and part.redelivered

    def summary(self) -> IngestSummary:
        return IngestSummary(
            self.source,
            self.accepted,
            self.skipped,
            tuple(self.rejects),
            dict(self.kinds),
            redelivered=self.units > 0 and self.redelivered,
            more_rejected=self.more_rejected,
        )


def _duplicate(source: str) -> IngestSummary:
    """What a unit whose key is already stored comes to: nothing stored again."""
    return IngestSummary(source, 0, 0, (), {}, duplicate=True)
