"""Reading a resume payload into a decision code; the payload itself is then dropped.

Decision words and labels (`purge_refused`), a policy's own labels, and LangChain's
`decisions` list, per spec/input.md "Payload → decision".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sidewatch.core.model import Code

_ACCEPT = frozenset(
    {"approve", "approved", "accept", "accepted", "allow", "allowed", "confirm", "confirmed"}
)
_DECLINE = frozenset(
    {"reject", "rejected", "decline", "declined", "deny", "denied", "refuse", "refused", "disallow"}
)
# Whole answers only: as parts of a label they are too common ("no_preference", "ok_to_wait").
_ACCEPT_WORDS = _ACCEPT | {"yes", "ok"}
_DECLINE_WORDS = _DECLINE | {"no"}
_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_BOOL_KEYS = ("approved", "confirmed", "accepted")
_WORD_KEYS = ("decision", "action", "type", "outcome")

Labels = Mapping[str, Code]  # a policy's own labels (lower case) -> accept | decline
NO_LABELS: Labels = {}


@dataclass(frozen=True, slots=True)
class Decision:
    """What an answer decided: the code, the digest it names, and whether the approved action
    is an edited one (`editedArgs`)."""

    code: Code
    digest: str | None = None
    edited: bool = False


def decision_of(payload: Any, labels: Labels = NO_LABELS) -> Decision:
    """`accept` or `decline` for a resolved resume entry.

    A boolean, a boolean `approved`/`confirmed`/`accepted`; a string, or a string
    `decision`/`action`/`type`/`outcome`, that is one of the policy's labels, a decision word
    or a label made of words; a LangChain-style `decisions` list (any reject declines);
    anything else answered is an accept.
    """
    if isinstance(payload, bool):
        return Decision(Code.ACCEPT if payload else Code.DECLINE)
    if isinstance(payload, str):
        return Decision(word_code(payload, labels) or Code.ACCEPT)
    if not isinstance(payload, dict):
        return Decision(Code.ACCEPT)
    digest = payload.get("approvedActionFingerprint")
    named = digest if isinstance(digest, str) else None
    code = _field_code(payload, labels)
    if code is None:
        decisions = payload.get("decisions")
        if isinstance(decisions, list) and decisions:
            kinds = [d.get("type") for d in decisions if isinstance(d, dict)]
            words = [word_code(k, labels) for k in kinds if isinstance(k, str)]
            code = Code.DECLINE if Code.DECLINE in words else None
    code = code or Code.ACCEPT
    edited = code is Code.ACCEPT and payload.get("editedArgs") is not None
    return Decision(code, named, edited)


def _field_code(payload: dict[str, Any], labels: Labels) -> Code | None:
    for key in _BOOL_KEYS:
        if isinstance(payload.get(key), bool):
            return Code.ACCEPT if payload[key] else Code.DECLINE
    for key in _WORD_KEYS:
        word = payload.get(key)
        if isinstance(word, str):
            code = word_code(word, labels)
            if code is not None:
                return code
    return None


def word_code(text: str, labels: Labels = NO_LABELS) -> Code | None:
    """The decision a string names: a policy label, a decision word, or a label whose parts
    (split on `_`, `-`, `.` and camelCase) hold one (decline winning); else None."""
    stripped = text.strip()
    word = stripped.lower()
    if word in labels:
        return labels[word]
    if word in _ACCEPT_WORDS:
        return Code.ACCEPT
    if word in _DECLINE_WORDS:
        return Code.DECLINE
    if not stripped or any(c.isspace() for c in stripped):
        return None  # free text is an answer, not a decision
    parts = {p.lower() for p in _PARTS.findall(stripped)}
    if parts & _DECLINE:
        return Code.DECLINE
    if parts & _ACCEPT:
        return Code.ACCEPT
    return None
