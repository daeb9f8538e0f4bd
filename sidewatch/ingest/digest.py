"""The action digest, and what a key protects: personal-looking approver references and,
when configured, every digest (keyed digests)."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import orjson
import rfc8785

from sidewatch.core.facts import (
    AnswerFact,
    Fact,
    InterruptFact,
    LegacyResumeFact,
    SignalFact,
    ToolCallFact,
)


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
    value = {"name": name, "args": args}
    # The wrapper's keys are ASCII and the name a string: only the arguments need the check.
    if type(args) is str or _orjson_is_canonical(args):
        return _sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS))
    return digest_of(value)


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
    return _sha256(canonical)


def _sha256(canonical: bytes) -> str:
    return "sha256:" + hashlib.sha256(canonical).hexdigest()


def _orjson_is_canonical(value: Any) -> bool:
    """True when orjson's sorted output is byte for byte RFC 8785 (checked against `rfc8785`
    in the tests): no floats, integers within 2**53, ASCII keys (so that UTF-8 and UTF-16 key
    orders agree). rfc8785 is pure Python and ten times slower; this is ingest's hot path,
    so a dict's or list's strings (most of any arguments) are passed over without a call."""
    kind = type(value)
    if kind is dict:
        return all(
            k.isascii() and (type(v) is str or _orjson_is_canonical(v)) for k, v in value.items()
        )
    if kind is list:
        return all(type(v) is str or _orjson_is_canonical(v) for v in value)
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
    """Keeps role and policy references as they are; replaces anything else by a keyed hash.
    With `keyed_digests`, also replaces every digest a unit's facts hold by a keyed one."""

    def __init__(self, key: bytes, prefixes: tuple[str, ...], keyed_digests: bool = False) -> None:
        self._key = key
        self._prefixes = prefixes
        self.keyed_digests = keyed_digests

    def __call__(self, ref: str) -> str:
        if ref.startswith(self._prefixes) and "@" not in ref:
            return ref
        mac = hmac.new(self._key, ref.encode("utf-8"), hashlib.sha256).hexdigest()
        return "hmac-sha256:" + mac[:32]

    def digest(self, digest: str) -> str:
        """`hmac-sha256:` + the hex HMAC-SHA256 of a digest as it came (computed `sha256:…`,
        or a producer's own): equal digests stay equal, so changes are still seen, but
        nobody without the key can confirm a guess of the arguments behind one."""
        return "hmac-sha256:" + self._mac(b"digest", digest)

    def _mac(self, domain: bytes, text: str) -> str:
        # The domain apart from approver references, which the same key hashes.
        return hmac.new(
            self._key, domain + b"\0" + text.encode("utf-8"), hashlib.sha256
        ).hexdigest()

    def digests(self, facts: Sequence[Fact]) -> Sequence[Fact]:
        """The facts with every digest keyed (as they are without `keyed_digests`). One
        function of every digest, applied to all of them before they are stored: a digest
        is only ever compared with another, so every comparison comes out as before."""
        if not self.keyed_digests:
            return facts  # ingest's hot path: no copy
        return [self._keyed(f) for f in facts]

    def _keyed(self, fact: Fact) -> Fact:
        if isinstance(fact, LegacyResumeFact):  # its map's entries carry digests too
            entries = tuple((h, c, d and self.digest(d)) for h, c, d in fact.entries)
            fact = replace(fact, entries=entries)
        if isinstance(fact, SignalFact) and fact.digest is not None:
            # Its natural key is a plain hash over the digest (and ids anyone can read): it
            # would confirm a guess as well. Keyed alike, re-deliveries still match.
            fact = replace(fact, key=self._mac(b"key", fact.key)[:32])
        if isinstance(fact, _DIGESTED) and fact.digest is not None:
            fact = replace(fact, digest=self.digest(fact.digest))
        return fact


_DIGESTED = (InterruptFact, ToolCallFact, AnswerFact, LegacyResumeFact, SignalFact)
