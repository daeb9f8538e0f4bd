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
        canonical = (
            orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
            if _orjson_is_canonical(value)
            else rfc8785.dumps(value)
        )
    except (rfc8785.CanonicalizationError, ValueError, TypeError):
        # Out of RFC 8785's domain (e.g. an integer beyond 2**53): fall back to sorted-key JSON.
        canonical = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    return "sha256:" + hashlib.sha256(canonical).hexdigest()


def _orjson_is_canonical(value: Any) -> bool:
    """True when orjson's sorted output is byte for byte RFC 8785 (checked against `rfc8785`
    in the tests): no floats, integers within 2**53, ASCII keys (so that UTF-8 and UTF-16 key
    orders agree). rfc8785 is pure Python and ten times slower; this is ingest's hot path."""
    if isinstance(value, str) or value is None or isinstance(value, bool):
        return True
    if isinstance(value, int):
        return -_MAX_INT <= value <= _MAX_INT
    if isinstance(value, list):
        return all(_orjson_is_canonical(v) for v in value)
    if isinstance(value, dict):
        return all(k.isascii() and _orjson_is_canonical(v) for k, v in value.items())
    return False


_MAX_INT = 2**53 - 1


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
