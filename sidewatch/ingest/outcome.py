"""AG-UI 1.0's `RUN_FINISHED` outcome: its interrupts, read by hand where they are plain JSON
(ingest's hot path, and no pydantic to import) and by ag-ui's model otherwise, and checked to
be fit to store; a success outcome's `pendingToolCallIds`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sidewatch.core.vocab import RejectReason
from sidewatch.ingest.bounds import DIGEST_MAX, REQUEST_ID_MAX
from sidewatch.ingest.fields import (
    LineError,
    check_expiry,
    checked,
    checked_or_none,
    str_or_none,
    valid,
)


@dataclass(frozen=True, slots=True)
class Interrupt:
    """What sidewatch reads of an AG-UI 1.0 `Interrupt`."""

    id: str
    reason: str
    tool_call_id: str | None
    expires_at: str | None
    metadata: dict[str, Any] | None
    response_schema: dict[str, Any] | None
    subagent_run_id: str | None = None

    @property
    def meta(self) -> dict[str, Any]:
        """The metadata, `{}` when there is none."""
        return self.metadata if isinstance(self.metadata, dict) else {}


# An interrupt outcome made only of these keys, with values of exactly these JSON types, is
# one `RunFinishedInterruptOutcome` validates as it is: read by hand. Anything else (a
# snake_case spelling, an extra key, a number for a string) is left to pydantic, which accepts
# or words the reject as always.
_OUTCOME_KEYS = frozenset({"type", "interrupts"})
_INTERRUPT_TYPES: dict[str, type] = {
    "id": str,
    "reason": str,
    "message": str,
    "toolCallId": str,
    "subagentRunId": str,
    "expiresAt": str,
    "responseSchema": dict,
    "metadata": dict,
}
_INTERRUPT_REQUIRED = ("id", "reason")


def interrupts(outcome: Any) -> list[Interrupt]:
    """The interrupts of a RUN_FINISHED `interrupt` outcome, validated."""
    plain = plain_interrupts(outcome) if type(outcome) is dict else None
    return plain if plain is not None else modelled_interrupts(outcome)


def modelled_interrupts(outcome: Any) -> list[Interrupt]:
    """The interrupts as ag-ui's `RunFinishedInterruptOutcome` validates and reads them: any
    spelling and shape the hand reader leaves (its reference, too)."""
    from ag_ui.core import RunFinishedInterruptOutcome  # noqa: PLC0415 (only when needed)

    parsed = valid(RunFinishedInterruptOutcome, outcome, "RUN_FINISHED: outcome")
    return [
        Interrupt(
            it.id,
            it.reason,
            it.tool_call_id,
            it.expires_at,
            it.metadata,
            it.response_schema,
            it.subagent_run_id,
        )
        for it in parsed.interrupts
    ]


def plain_interrupts(outcome: dict[str, Any]) -> list[Interrupt] | None:
    """The interrupts of an outcome of plain JSON as the model reads them, else None."""
    items = outcome.get("interrupts")
    if outcome.get("type") != "interrupt" or not outcome.keys() <= _OUTCOME_KEYS:
        return None
    if type(items) is not list or not items:
        return None
    out: list[Interrupt] = []
    for it in items:
        if type(it) is not dict:
            return None
        for key, value in it.items():
            want = _INTERRUPT_TYPES.get(key)
            if want is None or (type(value) is not want and value is not None):
                return None
        if any(type(it.get(k)) is not str for k in _INTERRUPT_REQUIRED):
            return None
        out.append(
            Interrupt(
                it["id"],
                it["reason"],
                it.get("toolCallId"),
                it.get("expiresAt"),
                it.get("metadata"),
                it.get("responseSchema"),
                it.get("subagentRunId"),
            )
        )
    return out


def check_interrupt(it: Interrupt, where: str) -> None:
    """The stored values of a 1.0 interrupt: its ids, reason, expiry and metadata."""
    checked(it.id, f"{where}: id")
    checked(it.reason, f"{where}: reason")
    checked_or_none(it.tool_call_id, f"{where}: toolCallId")
    checked_or_none(it.subagent_run_id, f"{where}: subagentRunId")
    check_expiry(it.expires_at, f"{where}: expiresAt")
    meta = it.meta
    checked_or_none(
        str_or_none(meta.get("requestId")), f"{where}: metadata.requestId", REQUEST_ID_MAX
    )
    checked_or_none(meta_digest(meta), f"{where}: metadata digest", DIGEST_MAX)


def meta_digest(meta: dict[str, Any]) -> str | None:
    """The producer's own fingerprint of the action, in an interrupt's metadata."""
    digest = meta.get("actionDigest")
    if isinstance(digest, str):
        return digest
    gov = meta.get("governance")
    if isinstance(gov, dict) and isinstance(gov.get("actionFingerprint"), str):
        return str(gov["actionFingerprint"])
    return None


def pending_ids(outcome: Any) -> list[str]:
    """A success outcome's `pendingToolCallIds` (checked like every stored id); [] when
    absent or empty."""
    ids = outcome.get("pendingToolCallIds") if isinstance(outcome, dict) else None
    if ids is None:
        return []
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise LineError(
            RejectReason.INVALID_FIELD,
            "RUN_FINISHED: outcome.pendingToolCallIds: must be a list of tool call ids",
        )
    for i, call_id in enumerate(ids):
        checked(call_id, f"RUN_FINISHED: outcome.pendingToolCallIds.{i}")
    return ids
