"""What ingest accepts as a stored time or id: times within a sane range, ids without control
characters and no longer than the store's columns hold. A value outside these rejects its line
(`time_out_of_range`, `invalid_id`), so a bad value can never reach a formatter or the store.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import orjson

# Event times and expiries are ms since the epoch within [2000-01-01, 2200-01-01): a producer
# sending seconds (~1.7e9 ms, January 1970), microseconds (~1.7e15) or nanoseconds (~1.7e18)
# instead of milliseconds falls outside, and every time inside converts to a date-time.
EARLIEST_MS = int(datetime(2000, 1, 1, tzinfo=UTC).timestamp() * 1000)
LATEST_MS = int(datetime(2200, 1, 1, tzinfo=UTC).timestamp() * 1000)
TIME_RANGE = "between 2000-01-01 and 2200-01-01"

# Ids, names, reasons and references: the id columns hold 256 characters, and 200 leaves room
# for the ids sidewatch derives from them (`{runId}#{n}`). A `requestId` is often built of a
# thread and an interrupt id (its column holds 512); digests are short by nature.
ID_MAX = 200
REQUEST_ID_MAX = 500
DIGEST_MAX = 128
# A legacy resume map's entries are kept as one JSON text (its column holds 8192).
ENTRIES_MAX = 8192
# C0 and C1 controls and DEL (a NUL is refused by PostgreSQL's text types), and the Unicode
# line and paragraph separators, which break log lines and reports like a newline.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def time_ok(ms: float) -> bool:
    """Whether a time in ms since the epoch is one sidewatch stores."""
    return EARLIEST_MS <= ms < LATEST_MS


def legacy_entries_json(entries: tuple[tuple[str, str, str | None], ...]) -> str:
    """A legacy resume map's entries in the JSON form the store keeps them in, to measure it
    against `ENTRIES_MAX`."""
    return orjson.dumps([list(e) for e in entries]).decode()


def id_problem(value: str, limit: int = ID_MAX) -> str | None:
    """What is wrong with an id (or name, reason, reference, digest) to be stored, if anything;
    the answer names the rule, never the value."""
    if len(value) > limit:
        return f"must be at most {limit} characters"
    if value.isascii():  # most ids: of ASCII, only C0 controls and DEL are not printable
        return None if value.isprintable() else "must not hold control characters"
    if _CONTROL.search(value):
        return "must not hold control characters"
    return None
