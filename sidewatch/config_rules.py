"""The rules across keys of config.yaml that no one key's type shows (a name used twice, the
default policy, a label both ways, a token's secret, TLS's two files), found in the raw file
whatever its keys hold, so that they are listed with every other problem."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from sidewatch.config import ENV_TOKENS
from sidewatch.config_models import Decisions, Mapped, Match
from sidewatch.config_values import Given, Problem, token_secret


def agreement(data: Mapping[str, Any], given: Given) -> list[Problem]:
    """The problems of keys that must agree, found in the raw file whatever its keys hold."""
    found: list[Problem] = []
    server = data.get("server") or {}
    if isinstance(server, Mapping):
        tokens = server.get("tokens")
        for n, item in enumerate(tokens if isinstance(tokens, list) else []):
            if isinstance(item, Mapping):
                found += [_within(("server", "tokens", n), p) for p in _token_problems(item, given)]
        found += [
            Problem((), "must be at least 16 characters", ("server", "tokens", 1e9), var)
            for var in ENV_TOKENS
            if given.env.get(var) and len(given.env[var]) < 16
        ]
        tls = server.get("tls")
        files = [tls.get(k) for k in ("certFile", "keyFile")] if isinstance(tls, Mapping) else []
        if tls and files and not all(isinstance(f, str) and f for f in files):
            found.append(
                Problem(("server", "tls"), "needs both certFile and keyFile (paths to PEM files)")
            )
    policies = data.get("policies")
    if isinstance(policies, list):
        found += _policy_problems(policies)
    return found


def _within(loc: tuple[int | str, ...], p: Problem) -> Problem:
    """A problem of a mapping found on its own, placed where the mapping is."""
    return dataclasses.replace(p, loc=(*loc, *p.loc), rank=p.rank and (*loc, *p.rank))


def _token_problems(item: Mapping[str, Any], given: Given) -> list[Problem]:
    secret, found = token_secret(item, given)
    indirect = "tokenEnv" in item or "tokenFile" in item
    short = not (isinstance(secret, str) and len(secret) >= 16)
    if found is None and short and (secret or not indirect):
        found = Problem((), "the token must be at least 16 characters", (1e9,))  # after its keys
    scopes = item.get("scopes")
    kinds = item.get("kinds") is not None and isinstance(scopes, list) and "ingest" not in scopes
    no_ingest = "narrows what an ingest token may send: this token has no ingest scope"
    return [*([found] if found else []), *([Problem(("kinds",), no_ingest)] if kinds else [])]


def _policy_problems(raw: list[Any]) -> list[Problem]:
    """A name used twice, a default that matches, a label that means accept in one policy and
    decline in another (it is read before the policy is known)."""
    found: list[Problem] = []
    names: set[str] = set()
    accept: dict[str, str] = {}
    decline: list[tuple[str, str]] = []
    for n, item in enumerate(raw):
        if not isinstance(item, Mapping):
            continue
        name = item.get("name")
        if isinstance(name, str) and name in names:
            found.append(Problem(("policies", n, "name"), f"{name!r} is used twice"))
        name = name if isinstance(name, str) and name else f"policy-{n}"
        names.add(name)
        if n == len(raw) - 1 and _valid(Match, item.get("match"), ("tools", "reasons")):
            last = "the last policy is the default and must have no match"
            found.append(Problem(("policies", n), last, ("policies", n, "match", 0.5)))
        labels = _valid(Decisions, item.get("decisions"), ("accept", "decline"))
        accept |= {w: name for w in labels.get("accept_labels", ())}
        decline += [(w, name) for w in labels.get("decline_labels", ())]
    for w, name in decline:
        if w in accept:
            shown = f"policies ({name}, {accept[w]}).decisions"
            found.append(Problem((), f"{w!r} is both accept and decline", ("policies", 1e9), shown))
    return found


def _valid(model: type[Mapped], raw: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    """The keys of a raw mapping that are valid each on its own, as `model` reads them."""
    out: dict[str, Any] = {}
    for key in keys:
        if isinstance(raw, Mapping) and key in raw:
            try:
                parsed = model.model_validate({key: raw[key]})
            except ValidationError:
                continue
            name = next(n for n, f in model.model_fields.items() if (f.alias or n) == key)
            if value := getattr(parsed, name):
                out[name] = value
    return out
