"""The action digest and the protection of personal-looking approver references."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import orjson
import rfc8785


def action_digest(name: str, args_text: str) -> str:
    """`sha256:` + hex SHA-256 of the RFC 8785 canonical JSON of {"name", "args"}.

    Arguments that are not JSON (a producer's bug, or a stream cut short) are digested as
    the string they are, so the digest still changes whenever they change.
    """
    args: Any
    try:
        args = orjson.loads(args_text) if args_text.strip() else {}
    except orjson.JSONDecodeError:
        args = args_text
    return digest_of({"name": name, "args": args})


def digest_of(value: Any) -> str:
    """`sha256:` + hex SHA-256 of a JSON value's RFC 8785 canonical form."""
    try:
        canonical = rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, ValueError, TypeError):
        # Out of RFC 8785's domain (e.g. an integer beyond 2**53): fall back to sorted-key JSON.
        canonical = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    return "sha256:" + hashlib.sha256(canonical).hexdigest()


class RefProtector:
    """Keeps role and policy references as they are; replaces anything else by a keyed hash."""

    def __init__(self, key: bytes, prefixes: tuple[str, ...]) -> None:
        self._key = key
        self._prefixes = prefixes

    def __call__(self, ref: str) -> str:
        if ref.startswith(self._prefixes) and "@" not in ref:
            return ref
        mac = hmac.new(self._key, ref.encode("utf-8"), hashlib.sha256).hexdigest()
        return "hmac-sha256:" + mac[:32]
