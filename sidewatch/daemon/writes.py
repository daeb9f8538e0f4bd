"""Whether the store takes writes now, as /readyz tells it: the outcome of the latest write
any part of the daemon made (an ingest commit, a lease renewal, a tick's save) and, when none
wrote lately, of a small write /readyz makes itself (store.db.probe_write)."""

from __future__ import annotations

import threading
from dataclasses import dataclass

FRESH_S = 5.0  # a committed write younger than this says the store takes writes: no probe
RETRY_S = 1.0  # a refused write is probed again after this long (when room was made, say)


@dataclass(frozen=True, slots=True)
class Outcome:
    at: float  # monotonic seconds, when the write ended
    refused: str | None  # None: committed; else the store's reason (store.db.failure)


class StoreWrites:
    """The latest write outcome, fed from worker threads and the event loop alike. Times are
    passed in (a monotonic clock): the caller reads it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.latest: Outcome | None = None
        self._probing_since: float | None = None

    def committed(self, at: float) -> None:
        self._record(Outcome(at, None))

    def refused(self, at: float, reason: str) -> None:
        self._record(Outcome(at, reason))

    def _record(self, outcome: Outcome) -> None:
        with self._lock:  # the latest by when it ended, whichever thread tells it first
            if self.latest is None or outcome.at >= self.latest.at:
                self.latest = outcome

    def probe_due(self, now: float) -> bool:
        """Whether /readyz should write to learn it (and, if so, that it now does: another
        /readyz meanwhile does not probe as well): nothing wrote within FRESH_S, or the
        latest write was refused more than RETRY_S ago."""
        with self._lock:
            latest, since = self.latest, self._probing_since
            if since is not None and now - since < RETRY_S:
                return False  # one probe at a time, and at most one a RETRY_S
            stale = latest is None or now - latest.at > (
                FRESH_S if latest.refused is None else RETRY_S
            )
            if stale:
                self._probing_since = now
            return stale

    def problem(self) -> str | None:
        """What /readyz says when the latest write was refused, naming why."""
        latest = self.latest
        if latest is None or latest.refused is None:
            return None
        return f"store refuses writes: {cause(latest.refused)} ({latest.refused})"


# The store's reason (its error class and code: SQLSTATE or SQLite's error name, and the
# server's one-line message) by what it means to an operator; the first that matches.
_CAUSES = (
    ("disk full", ("SQLITE_FULL", " 53100", "No space left", "disk is full", "disk full")),
    ("read-only", ("SQLITE_READONLY", " 25006", "read-only", "readonly")),
    ("permission denied", (" 42501", "SQLITE_PERM", "permission denied")),
    ("locked", ("SQLITE_BUSY", "SQLITE_LOCKED", " 55P03", "database is locked", "lock timeout")),
    ("cannot open the store", ("SQLITE_CANTOPEN", "unable to open")),
    (
        "connection lost",
        (" 08", " 57P0", "connection", "server closed", "terminating", "Connection refused"),
    ),
)


def cause(reason: str) -> str:
    """What a refused write's reason means, in a word or two ("disk full", "read-only",
    "connection lost"); "unavailable" when it is none of those."""
    for name, marks in _CAUSES:
        if any(m in reason for m in marks):
            return name
    return "unavailable"
