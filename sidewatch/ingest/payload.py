"""Reading a resume payload into a decision code; the payload itself is then dropped."""

from __future__ import annotations

from typing import Any

from sidewatch.core.model import Code

_ACCEPT = frozenset({"approve", "approved", "accept", "accepted"})
_DECLINE = frozenset({"reject", "rejected", "decline", "declined", "deny", "denied"})


def decision_of(payload: Any) -> tuple[Code, str | None]:
    """`accept` or `decline` for a resolved resume entry, and the digest it names, if any.

    A boolean, a boolean `approved`/`confirmed`, a string `decision`/`action`/`type` in the
    approve or reject vocabulary, or a LangChain-style `decisions` list (any reject declines);
    anything else answered is an accept.
    """
    if isinstance(payload, bool):
        return (Code.ACCEPT if payload else Code.DECLINE), None
    if not isinstance(payload, dict):
        return Code.ACCEPT, None
    digest = payload.get("approvedActionFingerprint")
    named = digest if isinstance(digest, str) else None
    for key in ("approved", "confirmed"):
        if isinstance(payload.get(key), bool):
            return (Code.ACCEPT if payload[key] else Code.DECLINE), named
    for key in ("decision", "action", "type"):
        word = payload.get(key)
        if isinstance(word, str):
            w = word.strip().lower()
            if w in _ACCEPT:
                return Code.ACCEPT, named
            if w in _DECLINE:
                return Code.DECLINE, named
    decisions = payload.get("decisions")
    if isinstance(decisions, list) and decisions:
        kinds = [d.get("type") for d in decisions if isinstance(d, dict)]
        if any(isinstance(k, str) and k.strip().lower() in _DECLINE for k in kinds):
            return Code.DECLINE, named
    return Code.ACCEPT, named
