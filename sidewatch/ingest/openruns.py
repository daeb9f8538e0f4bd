"""What the producers' dialects hold for a run's end across units, so that a run's end decides
the same of what came before it however the stream was cut: the `on_interrupt` events of a run
not ended yet, crewai's pauses and the ones it knows, and a thread's frontend-tool calls and
waits. Keyed by (what, threadId): a dialect takes a thread's record the first time its unit
touches the thread and leaves it back at the unit's end.

Held in this process's memory only, never in the store, as the open tool calls are
(`opencalls.py`): every record is identifiers, times, codes and flags (never a message, an
argument or a payload), and a unit takes what it read only once it is committed."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

# A record per (what, thread) with something held for a later unit: a forwarder has a few
# threads mid-run at a time; a stream that starts runs and never ends them must not grow the
# daemon. Past the bound the oldest record is *overdue*: the next unit read hands it to its
# dialect, which does what a run's end that never comes does (an `on_interrupt` event is
# announced with what it says alone), so a wait is never lost to the bound.
MAX_RECORDS = 4096

Key = tuple[str, str]  # (what, thread)


class OpenRuns:
    """The records units left, for the units after them (one per `Ingest`, shared by its
    units; thread-safe). Values are immutable (tuples): a unit's changes are its own until
    `settle`."""

    def __init__(self, max_records: int = MAX_RECORDS) -> None:
        self._records: OrderedDict[Key, Any] = OrderedDict()
        self._overdue: OrderedDict[Key, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.max_records = max_records

    def __len__(self) -> int:
        return len(self._records) + len(self._overdue)

    def fork(self) -> OpenRuns:
        """A copy, settled unit by unit, for the units of a batch read before any of them
        is committed (the values are immutable: shared)."""
        copy = OpenRuns(self.max_records)
        with self._lock:
            copy._records = OrderedDict(self._records)
            copy._overdue = OrderedDict(self._overdue)
        return copy

    def get(self, key: Key) -> Any | None:
        """The record (an overdue one too: a unit that touches its thread again takes it
        back)."""
        with self._lock:
            found = self._records.get(key)
            return self._overdue.get(key) if found is None else found

    def threads(self, what: str) -> list[str]:
        """The threads with a record of `what` (overdue ones too)."""
        with self._lock:
            return [k[1] for k in (*self._records, *self._overdue) if k[0] == what]

    def overdue(self) -> list[tuple[Key, Any]]:
        """The records the bound pushed out, oldest first, for the next unit to close."""
        with self._lock:
            return list(self._overdue.items())

    def settle(self, took: Iterable[Key], left: Iterable[tuple[Key, Any]]) -> None:
        """After a unit is committed: the records it took (and the overdue ones it closed)
        are no longer held; those it `left` are, until the bound makes the oldest overdue."""
        with self._lock:
            for key in took:
                self._records.pop(key, None)
                self._overdue.pop(key, None)
            for key, value in left:
                self._records.pop(key, None)
                self._records[key] = value
            while len(self._records) > self.max_records:
                key, value = self._records.popitem(last=False)
                self._overdue[key] = value


class RunHold:
    """One unit's view of the open runs: what it took from earlier units and what it leaves
    for later ones (`OpenRuns.settle`, once committed). `alone`: no later unit will come (an
    interpreter read on its own): what is held is closed at the unit's end instead. `closing`:
    the unit closes everything `runs` holds (the end of a file, a daemon stopping)."""

    def __init__(self, runs: OpenRuns | None = None, closing: bool = False) -> None:
        self.alone = runs is None or closing
        self.closing = closing
        self.runs = OpenRuns() if runs is None else runs
        self.took: set[Key] = set()
        self.left: dict[Key, Any] = {}
        self._overdue: list[tuple[Key, Any]] | None = None

    def take(self, what: str, thread: str) -> Any | None:
        """The thread's record of `what` held from an earlier unit, once per unit (None:
        none, or taken already)."""
        key = (what, thread)
        if key in self.took:
            return None
        self.took.add(key)
        return self.runs.get(key)

    def closed(self, what: str) -> list[str]:
        """The threads whose records of `what` a closing unit takes (none otherwise)."""
        return self.runs.threads(what) if self.closing else []

    def leave(self, what: str, thread: str, value: Any) -> None:
        """The thread's record of `what` for the next units (an empty one is not held)."""
        key = (what, thread)
        self.took.add(key)
        if value:
            self.left[key] = value
        else:
            self.left.pop(key, None)

    def overdue(self, what: str) -> list[tuple[str, Any]]:
        """The records of `what` the bound pushed out: (thread, record), now this unit's to
        close."""
        if self._overdue is None:
            self._overdue = self.runs.overdue()
        out = []
        for key, value in self._overdue:
            if key[0] == what and key not in self.took:
                self.took.add(key)
                out.append((key[1], value))
        return out

    def settle(self) -> None:
        """This unit's changes, into `runs` (once committed)."""
        self.runs.settle(self.took, self.left.items())
