"""Tool calls still open when their unit ended, keyed by (threadId, toolCallId), so that their
`TOOL_CALL_ARGS` and `TOOL_CALL_END` in a later unit belong to them. Held in this process's
memory only, never in the store: tool arguments are never stored, even for a while."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import replace

from sidewatch.ingest.producers.base import Call

# A forwarder posting a line a body has a few calls open at a time; a stream that starts calls
# and never ends them must not grow the daemon. Past either bound the oldest call is forgotten:
# its later parts are then orphans, a finding, never silence.
MAX_CALLS = 4096
MAX_BYTES = 16 * 1024 * 1024

Key = tuple[str, str]  # (thread, tool call id)


class OpenCalls:
    """The open calls a unit left, for the units after it (one per `Ingest`, shared by its
    units; thread-safe). A unit reads them with `get` and `of_run`, and when it is committed
    hands back what it `took` (ended or still open, now its own) and what it left open."""

    def __init__(self, max_calls: int = MAX_CALLS, max_bytes: int = MAX_BYTES) -> None:
        self._calls: OrderedDict[Key, Call] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.max_calls = max_calls
        self.max_bytes = max_bytes

    def __len__(self) -> int:
        return len(self._calls)

    def fork(self) -> OpenCalls:
        """A copy, settled unit by unit, for the units of a batch read before any of them
        is committed."""
        copy = OpenCalls(self.max_calls, self.max_bytes)
        with self._lock:
            copy._calls = OrderedDict(
                (k, replace(c, args=list(c.args))) for k, c in self._calls.items()
            )
            copy._bytes = self._bytes
        return copy

    def get(self, thread: str, call_id: str) -> Call | None:
        """A copy of the open call (its fragments a new list: a unit rolled back leaves the
        held call as it was)."""
        with self._lock:
            call = self._calls.get((thread, call_id))
        return None if call is None else replace(call, args=list(call.args))

    def of_run(self, thread: str, run: str) -> list[str]:
        """The ids of the run's open calls, oldest first."""
        with self._lock:
            return [k[1] for k, c in self._calls.items() if k[0] == thread and c.run_id == run]

    def settle(self, took: Iterable[Key], left: Iterable[tuple[str, Call]]) -> None:
        """After a unit is committed: the calls it took are no longer held; those it `left`
        open (call id, call) are, until the bounds forget the oldest."""
        with self._lock:
            for key in took:
                old = self._calls.pop(key, None)
                if old is not None:
                    self._bytes -= _size(old)
            for call_id, call in left:
                key = (call.thread_id, call_id)
                old = self._calls.pop(key, None)
                if old is not None:
                    self._bytes -= _size(old)
                self._calls[key] = call
                self._bytes += _size(call)
            while self._calls and (
                len(self._calls) > self.max_calls or self._bytes > self.max_bytes
            ):
                _, old = self._calls.popitem(last=False)
                self._bytes -= _size(old)


def _size(call: Call) -> int:
    return sum(map(len, call.args))
