"""The five `sidewatch.*` evidence events: value checks and their content-free facts."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from typing import Any

import orjson

from sidewatch.core.facts import (
    HeartbeatFact,
    ServiceBeatFact,
    ServiceBindFact,
    SignalFact,
    SignalKind,
)
from sidewatch.core.model import Code
from sidewatch.core.vocab import RejectReason
from sidewatch.ingest.bounds import DIGEST_MAX, ID_MAX, REQUEST_ID_MAX, id_problem


class EvidenceError(Exception):
    """An evidence event's value is wrong; `reason` is the bounded metric label."""

    def __init__(self, reason: RejectReason, message: str) -> None:
        super().__init__(message)
        self.reason = reason


_KINDS = {
    "sidewatch.route": SignalKind.ROUTE,
    "sidewatch.decision": SignalKind.DECISION,
    "sidewatch.action": SignalKind.ACTION,
    "sidewatch.receipt": SignalKind.RECEIPT,
}
EVIDENCE_NAMES = frozenset({*_KINDS, "sidewatch.heartbeat"})
# A route's channel is a code (`slack`, `ag-ui`, `email:oncall`), never content: anything else
# is kept as none, and the line is ingested with a finding (`route_channel_invalid`).
CHANNEL = re.compile(r"[A-Za-z0-9_.:-]{1,64}")


def route_channel(value: dict[str, Any]) -> tuple[str | None, bool]:
    """A route's `channel`, and whether one was given that is not a code (dropped)."""
    given = value.get("channel")
    if given is None:
        return None, False
    if isinstance(given, str) and CHANNEL.fullmatch(given):
        return given, False
    return None, True


def read_evidence(
    name: str,
    value: Any,
    at: int,
    seq: int,
    timed: bool,
    protect_ref: Callable[[str], str],
) -> SignalFact | HeartbeatFact | ServiceBeatFact | ServiceBindFact:
    """The fact of one evidence event. `timed`: the event carried its own timestamp, so a
    re-delivery is recognised by it; without one, by its content (heartbeats: never)."""
    if not isinstance(value, dict):
        raise EvidenceError(RejectReason.INVALID_FIELD, "value must be an object")
    if name == "sidewatch.heartbeat" and ("service" in value or "instance" in value):
        return _service_heartbeat(value, at, seq, timed)
    if name == "sidewatch.heartbeat":
        thread = _str(value, "threadId", required=True)
        assert thread is not None
        handle: bool | None = None
        if "resumeHandle" in value:
            h = value["resumeHandle"]
            if h is not None and not isinstance(h, str):
                raise EvidenceError(
                    RejectReason.INVALID_FIELD, "resumeHandle must be a string or null"
                )
            handle = h is not None
        run = _str(value, "runId")
        key = _key("hb", thread, run, handle, at) if timed else _key("hb", seq)
        return HeartbeatFact(thread_id=thread, at=at, seq=seq, run_id=run, handle=handle, key=key)
    kind = _KINDS.get(name)
    if kind is None:
        raise EvidenceError(RejectReason.UNKNOWN_EVIDENCE, "unknown evidence event")
    request_id = _str(value, "requestId", limit=REQUEST_ID_MAX)
    thread = _str(value, "threadId")
    interrupt = _str(value, "interruptId")
    if request_id is None and (thread is None or interrupt is None):
        raise EvidenceError(
            RejectReason.INVALID_FIELD,
            "names no wait: needs requestId, or threadId and interruptId",
        )
    approver = _str(value, "approverRef")
    if approver is not None:
        approver = protect_ref(approver)
    delivered = acknowledged = False
    channel: str | None = None
    code: Code | None = None
    digest = _str(value, "actionDigest", limit=DIGEST_MAX)
    if kind is SignalKind.ROUTE:
        delivered = _bool(value, "delivered", required=True)
        acknowledged = _bool(value, "acknowledged")
        channel, _ = route_channel(value)
    elif kind is SignalKind.DECISION:
        word = _str(value, "decision", required=True, limit=None)
        try:
            code = Code(str(word))
        except ValueError:
            raise EvidenceError(
                RejectReason.INVALID_FIELD, "decision must be one of accept, decline, cancel"
            ) from None
    elif kind is SignalKind.ACTION and digest is None:
        raise EvidenceError(RejectReason.INVALID_FIELD, "actionDigest: required")
    ident = (
        kind.value,
        request_id,
        thread,
        interrupt,
        approver,
        delivered,
        acknowledged,
        code,
        digest if kind is not SignalKind.ROUTE else None,
    )
    key = _key(*ident, at if timed else None)
    return SignalFact(
        kind=kind,
        at=at,
        seq=seq,
        request_id=request_id,
        thread_id=thread,
        interrupt_id=interrupt,
        approver_ref=approver,
        channel=channel,
        delivered=delivered,
        acknowledged=acknowledged,
        code=code,
        digest=digest if kind in (SignalKind.DECISION, SignalKind.ACTION) else None,
        key=key,
    )


def _service_heartbeat(
    value: dict[str, Any], at: int, seq: int, timed: bool
) -> ServiceBeatFact | ServiceBindFact:
    """The service form: `{service, instance, durable}` says the instance is alive; with a
    `threadId` (and `runId`), that the thread's waits are held by it."""
    service = _str(value, "service", required=True)
    instance = _str(value, "instance", required=True)
    assert service is not None and instance is not None
    durable = _bool(value, "durable", required=True)
    if "resumeHandle" in value:
        raise EvidenceError(
            RejectReason.INVALID_FIELD, "resumeHandle: not with service (durable says it)"
        )
    thread = _str(value, "threadId")
    if thread is None:
        if "runId" in value:
            raise EvidenceError(RejectReason.INVALID_FIELD, "runId: needs threadId")
        return ServiceBeatFact(service=service, instance=instance, durable=durable, at=at, seq=seq)
    run = _str(value, "runId")
    parts = ("bind", thread, run, service, instance, durable)
    key = _key(*parts, at) if timed else _key(*parts)
    return ServiceBindFact(
        thread_id=thread,
        run_id=run,
        service=service,
        instance=instance,
        durable=durable,
        at=at,
        seq=seq,
        key=key,
    )


def _key(*parts: Any) -> str:
    return hashlib.sha256(orjson.dumps(parts)).hexdigest()[:32]


def _str(
    value: dict[str, Any], key: str, required: bool = False, limit: int | None = ID_MAX
) -> str | None:
    """A string field; with a `limit`, one that is stored, so within the id rules too."""
    v = value.get(key)
    if v is None:
        if required:
            raise EvidenceError(RejectReason.INVALID_FIELD, f"{key}: required")
        return None
    if not isinstance(v, str) or not v:
        raise EvidenceError(RejectReason.INVALID_FIELD, f"{key}: must be a non-empty string")
    problem = id_problem(v, limit) if limit is not None else None
    if problem is not None:
        raise EvidenceError(RejectReason.INVALID_ID, f"{key}: {problem}")
    return v


def _bool(value: dict[str, Any], key: str, required: bool = False) -> bool:
    v = value.get(key)
    if v is None:
        if required:
            raise EvidenceError(RejectReason.INVALID_FIELD, f"{key}: required")
        return False
    if not isinstance(v, bool):
        raise EvidenceError(RejectReason.INVALID_FIELD, f"{key}: must be true or false")
    return v
