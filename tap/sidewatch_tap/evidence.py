"""The evidence client: the five `sidewatch.*` events, for the systems that hold that evidence.

A notifier reports the route it took, an approval UI the decision a person made, a runtime its
heartbeats, action changes and receipts (`../shared/spec/input.md`, "Evidence events"):

    evidence = Evidence("http://127.0.0.1:9477/v1/events", token=...)
    evidence.route(thread_id="t-1", interrupt_id="i-1", delivered=True,
                   approver_ref="team:payments", channel="slack")

Each call queues one line on a `Tap` (the same bounded queue, batching and retry) and returns at
once; it raises `ValueError` only for an event sidewatch would reject (no wait named, a wrong
decision word). A wait is named by `request_id`, or by `thread_id` and `interrupt_id` (the most
recent wait of that thread with that interrupt id). Every event carries the time it was made, so
a retried line is recognised as the same. Standard library only.
"""

from __future__ import annotations

import json
import time
from typing import Any

from sidewatch_tap.sender import Tap

__all__ = ["DECISIONS", "KEEP", "Evidence", "evidence_line"]

DECISIONS = frozenset({"accept", "decline", "cancel"})


class _Keep:
    """The default of `heartbeat(resume_handle=...)`: say nothing about the handle."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP: Any = _Keep()


def evidence_line(name: str, value: dict[str, Any], timestamp: int | None = None) -> bytes:
    """One NDJSON line: the `CUSTOM` event `sidewatch.<name>` with `value` and the time in ms
    since the epoch (now, unless given)."""
    event = {
        "type": "CUSTOM",
        "name": f"sidewatch.{name}",
        "timestamp": int(time.time() * 1000) if timestamp is None else timestamp,
        "value": value,
    }
    return json.dumps(event, separators=(",", ":")).encode()


def _given(**fields: Any) -> dict[str, Any]:
    """The fields that were given (None: left out, as the spec's optional fields are)."""
    return {k: v for k, v in fields.items() if v is not None}


def _ref(request_id: str | None, thread_id: str | None, interrupt_id: str | None) -> dict[str, Any]:
    if request_id is None and (thread_id is None or interrupt_id is None):
        raise ValueError("name the wait: request_id, or thread_id and interrupt_id")
    return _given(requestId=request_id, threadId=thread_id, interruptId=interrupt_id)


class Evidence:
    """Reports evidence to sidewatch through a `Tap` (its own, or one given to share)."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        tap: Tap | None = None,
        **options: Any,
    ) -> None:
        if tap is None and url is None:
            raise ValueError("Evidence needs the sidewatch url (or a Tap)")
        self.tap = tap or Tap(str(url), token, **options)

    def route(
        self,
        *,
        delivered: bool,
        request_id: str | None = None,
        thread_id: str | None = None,
        interrupt_id: str | None = None,
        approver_ref: str | None = None,
        channel: str | None = None,
        acknowledged: bool | None = None,
        error: str | None = None,
    ) -> None:
        """A notification attempt and its outcome (`acknowledged`: the approver opened it)."""
        value = _ref(request_id, thread_id, interrupt_id)
        value.update(
            _given(
                delivered=bool(delivered),
                approverRef=approver_ref,
                channel=channel,
                acknowledged=acknowledged,
                error=error,
            )
        )
        self._send("route", value)

    def decision(
        self,
        decision: str,
        *,
        request_id: str | None = None,
        thread_id: str | None = None,
        interrupt_id: str | None = None,
        approver_ref: str | None = None,
        action_digest: str | None = None,
    ) -> None:
        """A person decided `accept`, `decline` or `cancel` (`action_digest`: what they saw)."""
        if decision not in DECISIONS:
            raise ValueError(f"decision must be one of {', '.join(sorted(DECISIONS))}")
        value = _ref(request_id, thread_id, interrupt_id)
        value.update(
            _given(decision=decision, approverRef=approver_ref, actionDigest=action_digest)
        )
        self._send("decision", value)

    def heartbeat(
        self, thread_id: str, *, run_id: str | None = None, resume_handle: Any = KEEP
    ) -> None:
        """The requester of `thread_id` is alive. `resume_handle`: a string while it holds a
        durable handle for the thread's interrupted run, None when it holds none; left out,
        the handle is unchanged."""
        if (
            resume_handle is not KEEP
            and resume_handle is not None
            and not isinstance(resume_handle, str)
        ):
            raise ValueError("resume_handle must be a string or None")
        value = _given(threadId=thread_id, runId=run_id)
        if resume_handle is not KEEP:
            value["resumeHandle"] = resume_handle  # here null is meaningful: no handle held
        self._send("heartbeat", value)

    def action(
        self,
        action_digest: str,
        *,
        request_id: str | None = None,
        thread_id: str | None = None,
        interrupt_id: str | None = None,
    ) -> None:
        """The proposed action changed (or was re-confirmed): its digest now."""
        value = _ref(request_id, thread_id, interrupt_id)
        value["actionDigest"] = action_digest
        self._send("action", value)

    def receipt(
        self,
        *,
        request_id: str | None = None,
        thread_id: str | None = None,
        interrupt_id: str | None = None,
    ) -> None:
        """The run consumed the decision (for runtimes that report it directly)."""
        self._send("receipt", _ref(request_id, thread_id, interrupt_id))

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait (up to `timeout`) until everything reported was sent or dropped."""
        return self.tap.flush(timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Send what is queued (within `timeout`) and stop."""
        self.tap.close(timeout)

    def _send(self, name: str, value: dict[str, Any]) -> None:
        self.tap.record_line(evidence_line(name, value))
