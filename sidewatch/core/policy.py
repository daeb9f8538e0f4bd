"""Policies: thresholds and evidence rules per action, matched by tool name or reason."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from fnmatch import fnmatchcase

from sidewatch.core.model import Thresholds


class Need(StrEnum):
    """Whether a policy's verdicts wait for an evidence item (route, handle, heartbeat)."""

    REQUIRED = "required"
    IGNORED = "ignored"  # this deployment never reports the item: its absence proves nothing


class ReceiptKind(StrEnum):
    """What proves that an accept was consumed by the continuing run."""

    RUN_STARTED = "run_started"  # the continuing run's start consumes the decision (default)
    TOOL_RESULT = "tool_result"  # only the gated tool call's TOOL_CALL_RESULT does


@dataclass(frozen=True, slots=True)
class Policy:
    """The thresholds and evidence rules of the waits whose tool name or reason it matches:
    which evidence the deployment reports, what counts as the receipt, and the producer's
    own words for accept and decline."""

    name: str
    thresholds: Thresholds
    tools: tuple[str, ...] = ()  # glob patterns over the action's tool name
    reasons: tuple[str, ...] = ()  # glob patterns over the interrupt reason
    require_acknowledgement: bool = False
    receipt: ReceiptKind = ReceiptKind.RUN_STARTED
    route: Need = Need.REQUIRED
    handle: Need = Need.REQUIRED
    heartbeat: Need = Need.REQUIRED
    # the producer's own answer labels (`decisions:`), read at ingest before the default words
    accept_labels: tuple[str, ...] = ()
    decline_labels: tuple[str, ...] = ()

    def matches(self, action: str | None, reason: str | None) -> bool:
        """True when the policy names no pattern at all (a catch-all) or one pattern matches."""
        if not self.tools and not self.reasons:
            return True
        return (action is not None and any(fnmatchcase(action, p) for p in self.tools)) or (
            reason is not None and any(fnmatchcase(reason, p) for p in self.reasons)
        )


DEFAULT_THRESHOLDS = Thresholds(
    resume_grace_ms=5 * 60_000, heartbeat_freshness_ms=10 * 60_000, route_grace_ms=2 * 60_000
)
DEFAULT_POLICY = Policy(name="default", thresholds=DEFAULT_THRESHOLDS)


def select(policies: tuple[Policy, ...], action: str | None, reason: str | None) -> Policy:
    """The first policy that matches the action; the built-in default when none does."""
    for policy in policies:
        if policy.matches(action, reason):
            return policy
    return DEFAULT_POLICY
