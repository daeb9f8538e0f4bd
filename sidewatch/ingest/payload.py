"""Reading a resume payload into a decision code; the payload itself is then dropped."""

from __future__ import annotations

import re
from typing import Any

from sidewatch.core.model import Code

_ACCEPT = frozenset({"approve", "approved", "accept", "accepted"})
_DECLINE = frozenset({"reject", "rejected", "decline", "declined", "deny", "denied"})


def decision_of(payload: Any) -> tuple[Code, str | None]:
    """`accept` or `decline` for a resolved resume entry, and the digest it names, if any.

    A boolean, a boolean `approved`/`confirmed`/`accepted`, a bare string label, a string
    `decision`/`action`/`type` in the approve or reject vocabulary, or a LangChain-style
    `decisions` list (any reject declines); anything else answered is an accept.
    """
    if isinstance(payload, bool):
        return (Code.ACCEPT if payload else Code.DECLINE), None
    if isinstance(payload, str):  # a bare label: CrewAI's "rejected", "purge_refused"
        return _label(payload) or Code.ACCEPT, None
    if not isinstance(payload, dict):
        return Code.ACCEPT, None
    digest = payload.get("approvedActionFingerprint")
    named = digest if isinstance(digest, str) else None
    for key in ("approved", "confirmed", "accepted"):
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


# The spec's decision words, for bare string payloads (AG-UI producers that answer with a
# label: ag-ui-crewai, Agent Framework workflows).
_ACCEPT_WORDS = _ACCEPT | {"allow", "allowed", "confirm", "confirmed", "yes", "ok"}
_DECLINE_WORDS = _DECLINE | {"refuse", "refused", "disallow", "no"}
_PARTS = re.compile(r"[_.\-]+|(?<=[a-z0-9])(?=[A-Z])")


def _label(text: str) -> Code | None:
    """A decision word, or one token whose parts (split on `_`, `-`, `.` and camelCase)
    include one other than yes/ok/no, decline words winning; free text is no decision."""
    word = text.strip().lower()
    if word in _DECLINE_WORDS:
        return Code.DECLINE
    if word in _ACCEPT_WORDS:
        return Code.ACCEPT
    token = text.strip()
    if not token or any(c.isspace() for c in token):
        return None
    parts = {p.lower() for p in _PARTS.split(token) if p} - {"yes", "ok", "no"}
    if parts & _DECLINE_WORDS:
        return Code.DECLINE
    if parts & _ACCEPT_WORDS:
        return Code.ACCEPT
    return None
