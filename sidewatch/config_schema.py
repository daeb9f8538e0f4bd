"""config.yaml as pydantic models: one model per mapping, its camelCase keys as aliases, each
default read from the record the key fills (`Config`, `NatsSource`, `Policy`), so that it is
written once. `parse` reports a file's every problem at once, one line each in sidewatch's
words (pydantic's own are mapped); `json_schema` is what `check-config --schema` prints.

Loaded only where a file is parsed: pydantic would cost `--help` most of its start."""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from collections.abc import Callable, Mapping
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    ModelWrapValidatorHandler,
    PlainValidator,
    Strict,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import InitErrorDetails, PydanticCustomError, PydanticUseDefault, core_schema

from sidewatch.config import (
    ENV_DB_URL,
    ENV_NATS_URL,
    ENV_REF_KEY,
    ENV_TOKENS,
    INGEST_KINDS,
    NATS_SCHEMES,
    Config,
    NatsSource,
    Token,
    listen_problem,
    parse_duration,
)
from sidewatch.core.model import Thresholds
from sidewatch.core.policy import DEFAULT_THRESHOLDS, Need, Policy, ReceiptKind
from sidewatch.errors import ConfigError

# -- what a file is checked against ----------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Given:
    """What a file may refer to besides itself: the environment (`tokenEnv`) and the token
    files the shell read (`tokenFile`: path -> content, None when unreadable)."""

    env: Mapping[str, str]
    files: Mapping[str, str | None]


class _Defaults:
    """A record's defaults as config.yaml spells them (a duration, `…_ms`, as 5m; a tuple as a
    list): a model's default is its record's, read from there, never written again."""

    def __init__(self, record: Any) -> None:
        self._record = record

    def __getattr__(self, name: str) -> Any:
        record = self._record
        if isinstance(record, type):
            value: Any = next(f.default for f in dataclasses.fields(record) if f.name == name)
        else:
            value = getattr(record, name)
        if name.endswith("_ms"):
            return _spelled(value)
        return list(value) if isinstance(value, tuple) else value


def _spelled(ms: int) -> str:
    """A duration as config.yaml writes it (90000 as 1m30s): `parse_duration`'s inverse."""
    out = ""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        n, ms = divmod(ms, size)
        out += f"{n}{unit}" if n else ""
    return out + f"{ms}ms" if ms or not out else out


CONFIG = _Defaults(Config())
NATS = _Defaults(NatsSource)
POLICY = _Defaults(Policy)
THRESHOLDS = _Defaults(DEFAULT_THRESHOLDS)

# -- one key's value: a problem is one line in sidewatch's words -----------------------------


def _problem(text: str, **ctx: str) -> PydanticCustomError:
    """A problem in sidewatch's words. `path` (context) replaces the key path it is shown
    under; `after` places a mapping's own problem after that key's."""
    return PydanticCustomError("sidewatch", text, ctx or None)


def _again(err: Any) -> InitErrorDetails:
    """A problem found below, raised again as it was worded."""
    return {"type": _problem(err["msg"], **err.get("ctx", {})), "loc": err["loc"], "input": None}


@dataclasses.dataclass(frozen=True, slots=True)
class _Rule:
    """Any failure of the value it annotates (its type, its range, a list's item) is this one
    problem; a required key's absence too."""

    text: str

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_wrap_validator_function(self._validate, handler(source))

    def _validate(self, value: Any, inner: core_schema.ValidatorFunctionWrapHandler) -> Any:
        try:
            return inner(value)
        except ValidationError:
            raise _problem(self.text) from None


@dataclasses.dataclass(frozen=True, slots=True)
class _Shape(_Rule):
    """A list that is not one (or is empty) is this problem; its items' problems are their
    own."""

    def _validate(self, value: Any, inner: core_schema.ValidatorFunctionWrapHandler) -> Any:
        try:
            return inner(value)
        except ValidationError as e:
            # An item's problems are the list's only ones: a list whose every item failed
            # is also "too short" to pydantic, after validation.
            items = [_again(err) for err in e.errors() if err["loc"]]
            if not items:
                raise _problem(self.text) from None
            raise ValidationError.from_exception_data("list", items) from None


def _checked(problem: Callable[[Any], str | None]) -> BeforeValidator:
    """The value is refused with the problem `problem` finds in it (None: none)."""

    def validate(value: Any) -> Any:
        if (text := problem(value)) is not None:
            raise _problem(text)
        return value

    return BeforeValidator(validate)


def _must(ok: Callable[[Any], object]) -> AfterValidator:
    def validate(value: Any) -> Any:
        if not ok(value):
            raise ValueError(value)
        return value

    return AfterValidator(validate)


def _yaml(value: Any) -> Any:
    """A default given as the file would give it, validated like the file's own."""
    return value


def _unset(value: Any) -> Any:
    """null is the key's default."""
    if value is None:
        raise PydanticUseDefault
    return value


def _unset_if_empty(value: Any) -> Any:
    """null, or any other empty value but a mapping, is the section's default."""
    if value is None or (not value and not isinstance(value, Mapping)):
        raise PydanticUseDefault
    return value


def _duration_ms(value: Any) -> int:
    try:
        return parse_duration(value)
    except ValueError as e:
        raise _problem(str(e)) from None


def _at_least(ms: int, spelled: str | None = None) -> AfterValidator:
    def validate(value: int) -> int:
        if value < ms:
            raise _problem(f"must be at least {spelled or f'{ms / 1000:g}s'}")
        return value

    return AfterValidator(validate)


_DURATION_SCHEMA = {
    "anyOf": [
        {"type": "string", "pattern": r"^\s*(\d+|(?=\d)(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?)\s*$"},
        {"type": "number", "minimum": 0},
    ],
    "description": "a duration: 90s, 5m, 1h30m, 7d, 250ms, or a number of seconds",
}

Duration = Annotated[int, PlainValidator(_duration_ms), WithJsonSchema(_DURATION_SCHEMA)]
Flag = Annotated[bool, Strict(), _Rule("must be true or false")]
NonEmpty = Annotated[str, Strict(), Field(min_length=1)]
Globs = Annotated[tuple[NonEmpty, ...], _Rule("must be a list of glob patterns")]


def _open_bracket(pattern: str) -> bool:
    """A `[` that no `]` closes (as fnmatch reads a set: `[!…]`, and a `]` right after the
    `[` or `[!` is a member): fnmatch then matches the `[` itself, never what was meant."""
    i = 0
    while i < len(pattern):
        if pattern[i] == "[":
            j = i + 1
            j += pattern.startswith("!", j)
            j += pattern.startswith("]", j)
            i = pattern.find("]", j)
            if i < 0:
                return True
        i += 1
    return False


def _tool_globs(patterns: tuple[str, ...]) -> tuple[str, ...]:
    bad = [p for p in patterns if _open_bracket(p)]
    if bad:
        raise _problem(f"{bad[0]!r} is not a glob pattern: a '[' in it is never closed")
    return patterns


# Glob patterns of tool names whose every pattern means what it says (`check-config` refuses
# one fnmatch would read as a literal `[`).
ToolGlobs = Annotated[Globs, AfterValidator(_tool_globs)]


Bytes = Annotated[int, Strict(), Field(ge=1024), _Rule("must be a number of bytes, at least 1024")]


def _choice(enum: type[ReceiptKind | Need]) -> _Rule:
    return _Rule(f"must be one of {', '.join(e.value for e in enum)}")


# -- a mapping's keys: unknown ones refused, every problem found -----------------------------


class _Section(BaseModel):
    """A mapping of config.yaml: an unknown key is a problem, and so is every other one found
    beside it (each key's, then the mapping's own `problems`), in the order of the keys."""

    model_config = ConfigDict(extra="forbid", validate_default=True)

    shape: ClassVar[str] = "must be a mapping"
    unknown: ClassVar[str] = "unknown key"
    unknown_after: ClassVar[str | None] = None  # unknown keys: first, or after this key's

    @classmethod
    def problems(cls, data: Mapping[str, Any], given: Given) -> list[InitErrorDetails]:
        """The mapping's own problems (keys that must agree), found whatever its keys hold."""
        return []

    def record(self, given: Given) -> dict[str, Any]:
        """The `Config` fields it sets (a field is named as the record's, a section's fields
        are its parent's)."""
        out: dict[str, Any] = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            out |= value.record(given) if isinstance(value, _Section) else {name: value}
        return out

    @model_validator(mode="wrap")
    @classmethod
    def _every_problem(
        cls, data: Any, handler: ModelWrapValidatorHandler[Self], info: ValidationInfo
    ) -> Self:
        found: list[InitErrorDetails] = []
        try:
            value = handler(data)
        except ValidationError as e:
            found = [cls._worded(err) for err in e.errors()]
        if isinstance(data, Mapping):
            given = info.context if isinstance(info.context, Given) else Given({}, {})
            found += cls.problems(data, given)
        if found:
            raise ValidationError.from_exception_data(cls.__name__, sorted(found, key=cls._rank))
        return value

    @classmethod
    def _keys(cls) -> list[str]:
        return [f.alias or name for name, f in cls.model_fields.items()]

    @classmethod
    def _unknown(cls) -> str:
        return cls.unknown

    @classmethod
    def _worded(cls, err: Any) -> InitErrorDetails:
        """pydantic's error as sidewatch's problem (its own ones are worded already)."""
        loc, kind = err["loc"], err["type"]
        if kind == "sidewatch":
            return _again(err)
        if not loc:
            found = _problem(cls.shape)
        elif kind in ("extra_forbidden", "invalid_key"):
            found = _problem(cls._unknown())
        elif kind == "missing":
            field = next(f for n, f in cls.model_fields.items() if (f.alias or n) == loc[0])
            found = _problem(next(m.text for m in field.metadata if isinstance(m, _Rule)))
        else:  # not expected: every key's type carries its own wording
            found = _problem(err["msg"])
        return {"type": found, "loc": loc, "input": None}

    @classmethod
    def _rank(cls, err: InitErrorDetails) -> tuple[float, str]:
        """Where a problem is listed: with its key, in the order of the keys; unknown keys by
        name; the mapping's own after the key it names (`after`), else last."""
        keys, loc = cls._keys(), err["loc"]
        if not loc:
            kind = err["type"]
            after = (kind.context or {}).get("after") if not isinstance(kind, str) else None
            return (keys.index(after) + 0.5 if after else len(keys), "")
        if loc[0] in keys:
            return (keys.index(str(loc[0])), "")
        return (keys.index(cls.unknown_after) + 0.5 if cls.unknown_after else -1, str(loc[0]))


# -- store, privacy -------------------------------------------------------------------------


class Store(_Section):
    """The store: SQLite (embedded, the default) or PostgreSQL."""

    db_url: Annotated[
        str,
        Strict(),
        _must(lambda url: "://" in url),
        _Rule("must be a database URL such as sqlite:///./sidewatch.db"),
    ] = Field(CONFIG.db_url, alias="url")
    store_connect_timeout_ms: Annotated[Duration, _at_least(2000)] = Field(
        CONFIG.store_connect_timeout_ms, alias="connectTimeout"
    )
    store_statement_timeout_ms: Annotated[Duration, _at_least(100)] = Field(
        CONFIG.store_statement_timeout_ms, alias="statementTimeout"
    )
    store_pool_timeout_ms: Annotated[Duration, _at_least(100)] = Field(
        CONFIG.store_pool_timeout_ms, alias="poolTimeout"
    )
    store_pool_size: Annotated[
        int, Strict(), Field(ge=1), _Rule("must be a whole number of connections, at least 1")
    ] = Field(CONFIG.store_pool_size, alias="poolSize")
    store_prepare_threshold: Annotated[
        Annotated[int, Strict(), Field(ge=0)] | None,
        _Rule(
            "must be a whole number of runs, or null to never prepare statements on the server "
            "(PgBouncer in transaction mode)"
        ),
    ] = Field(CONFIG.store_prepare_threshold, alias="prepareThreshold")
    store_busy_timeout_ms: Duration = Field(CONFIG.store_busy_timeout_ms, alias="busyTimeout")
    store_retention_ms: Annotated[Duration, _at_least(3_600_000, "1h")] = Field(
        CONFIG.store_retention_ms, alias="retention"
    )
    store_heartbeat_compaction_ms: Duration = Field(
        CONFIG.store_heartbeat_compaction_ms, alias="heartbeatCompaction"
    )

    def record(self, given: Given) -> dict[str, Any]:
        return super().record(given) | {"db_url": given.env.get(ENV_DB_URL) or self.db_url}


class Privacy(_Section):
    """What sidewatch keeps of people and actions."""

    approver_ref_key: Annotated[
        Annotated[str, Strict(), Field(min_length=16)] | None,
        _Rule("must be a string of at least 16 characters"),
    ] = Field(CONFIG.approver_ref_key, alias="approverRefKey")
    hash_key_file: Annotated[NonEmpty | None, _Rule("must be a file path")] = Field(
        CONFIG.hash_key_file, alias="hashKeyFile"
    )
    action_digest: Annotated[Literal["plain", "keyed"], _Rule("must be plain or keyed")] = Field(
        "keyed" if CONFIG.keyed_digests else "plain", alias="actionDigest"
    )
    role_prefixes: Annotated[tuple[NonEmpty, ...], _Rule("must be a list of non-empty strings")] = (
        Field(CONFIG.role_prefixes, alias="rolePrefixes")
    )

    def record(self, given: Given) -> dict[str, Any]:
        return {
            "approver_ref_key": given.env.get(ENV_REF_KEY) or self.approver_ref_key,
            "hash_key_file": self.hash_key_file,
            "keyed_digests": self.action_digest == "keyed",
            "role_prefixes": self.role_prefixes,
        }


# -- policies -------------------------------------------------------------------------------


class Match(_Section):
    """Glob patterns over the action's tool name and the interrupt reason."""

    shape = "must be a mapping with tools and/or reasons"
    unknown = "unknown key (known: tools, reasons)"
    unknown_after = "reasons"

    tools: Globs = Field(POLICY.tools)
    reasons: Globs = Field(POLICY.reasons)


Labels = Annotated[
    tuple[Annotated[str, Strict(), _must(str.strip)], ...],
    _Rule("must be a list of non-empty labels"),
    AfterValidator(lambda labels: tuple(w.strip().lower() for w in labels)),
]


class Decisions(_Section):
    """The producer's own answer labels, read before the default decision words."""

    shape = "must map accept/decline to lists of labels"
    unknown = "unknown key (known: accept, decline)"

    accept_labels: Labels = Field(POLICY.accept_labels, alias="accept")
    decline_labels: Labels = Field(POLICY.decline_labels, alias="decline")


class Evidence(_Section):
    """Which evidence this deployment reports: what is ignored is not waited for."""

    shape = "must map route/handle/heartbeat to required|ignored"
    unknown = "unknown item (known: route, handle, heartbeat)"
    unknown_after = "heartbeat"

    route: Annotated[Need, _choice(Need)] = Field(POLICY.route)
    handle: Annotated[Need, _choice(Need)] = Field(POLICY.handle)
    heartbeat: Annotated[Need, _choice(Need)] = Field(POLICY.heartbeat)


class PolicyEntry(_Section):
    """A policy: the thresholds and evidence rules for the actions it matches."""

    unknown_after = "name"

    name: Annotated[str, Strict(), Field(min_length=1), _Rule("required, a non-empty string")]
    match: Annotated[Match, BeforeValidator(_unset)] = Field(_yaml({}))
    decisions: Annotated[Decisions, BeforeValidator(_unset)] = Field(_yaml({}))
    resume_grace_ms: Duration = Field(THRESHOLDS.resume_grace_ms, alias="resumeGrace")
    heartbeat_freshness_ms: Duration = Field(
        THRESHOLDS.heartbeat_freshness_ms, alias="heartbeatFreshness"
    )
    route_grace_ms: Duration = Field(THRESHOLDS.route_grace_ms, alias="routeGrace")
    require_acknowledgement: Flag = Field(
        POLICY.require_acknowledgement, alias="requireAcknowledgement"
    )
    receipt: Annotated[ReceiptKind, _choice(ReceiptKind)] = Field(POLICY.receipt)
    evidence: Annotated[Evidence, BeforeValidator(_unset)] = Field(_yaml({}))

    def policy(self) -> Policy:
        return Policy(
            name=self.name,
            thresholds=Thresholds(
                self.resume_grace_ms, self.heartbeat_freshness_ms, self.route_grace_ms
            ),
            tools=self.match.tools,
            reasons=self.match.reasons,
            require_acknowledgement=self.require_acknowledgement,
            receipt=self.receipt,
            route=self.evidence.route,
            handle=self.evidence.handle,
            heartbeat=self.evidence.heartbeat,
            accept_labels=self.decisions.accept_labels,
            decline_labels=self.decisions.decline_labels,
        )


def _policy_problems(raw: list[Any]) -> list[InitErrorDetails]:
    """What no one policy shows: a name used twice, a default that matches, a label that
    means accept in one policy and decline in another (it is read before the policy is known)."""
    found: list[InitErrorDetails] = []
    names: set[str] = set()
    accept: dict[str, str] = {}
    decline: list[tuple[str, str]] = []
    for n, item in enumerate(raw):
        if not isinstance(item, Mapping):
            continue
        name = item.get("name")
        if isinstance(name, str) and name in names:
            found.append(_at((n, "name"), f"{name!r} is used twice"))
        name = name if isinstance(name, str) and name else f"policy-{n}"
        names.add(name)
        if n == len(raw) - 1 and _given(Match, item.get("match"), ("tools", "reasons")):
            found.append(
                _at((n,), "the last policy is the default and must have no match", after="match")
            )
        labels = _given(Decisions, item.get("decisions"), ("accept", "decline"))
        accept |= {w: name for w in labels.get("accept_labels", ())}
        decline += [(w, name) for w in labels.get("decline_labels", ())]
    for w, name in decline:
        if w in accept:
            path = f"policies ({name}, {accept[w]}).decisions"
            found.append(_at((), f"{w!r} is both accept and decline", path=path))
    return found


def _given(model: type[_Section], raw: Any, keys: tuple[str, ...]) -> dict[str, Any]:
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


def _at(loc: tuple[int | str, ...], text: str, **ctx: str) -> InitErrorDetails:
    return {"type": _problem(text, **ctx), "loc": loc, "input": None}


# -- server ---------------------------------------------------------------------------------


def _kinds_problem(value: Any) -> str | None:
    """What is wrong with a token's `kinds` (null: every kind), naming the valid ones."""
    valid = ", ".join(INGEST_KINDS)
    if value is None:
        return None
    if not isinstance(value, list | tuple) or not value:
        return f"must be a non-empty list of the kinds {valid}"
    unknown = [k for k in value if k not in INGEST_KINDS]
    if unknown:
        return f"{unknown[0]!r} is not a kind of line; the kinds are {valid}"
    return None


class TokenEntry(_Section):
    """A bearer token and its scopes, given inline, by environment variable or by file; an
    ingest token may be narrowed to the kinds of line its sender produces."""

    name: Annotated[Any, WithJsonSchema({"type": "string"})] = None  # unset: token-N
    scopes: Annotated[
        tuple[Literal["ingest", "read"], ...],
        Field(min_length=1),
        _Rule("must be a non-empty list of ingest, read"),
    ]
    kinds: Annotated[
        tuple[str, ...] | None,
        _checked(_kinds_problem),
        WithJsonSchema(
            {
                "anyOf": [
                    {"type": "array", "items": {"enum": list(INGEST_KINDS)}, "minItems": 1},
                    {"type": "null"},  # every kind, as when absent
                ]
            }
        ),
    ] = None
    token: Annotated[Any, WithJsonSchema({"type": "string", "minLength": 16})] = None
    token_env: Annotated[Any, WithJsonSchema({"type": "string"})] = Field(None, alias="tokenEnv")
    token_file: Annotated[Any, WithJsonSchema({"type": "string"})] = Field(None, alias="tokenFile")

    @classmethod
    def problems(cls, data: Mapping[str, Any], given: Given) -> list[InitErrorDetails]:
        secret, problem = _secret(data, given)
        indirect = "tokenEnv" in data or "tokenFile" in data
        short = not (isinstance(secret, str) and len(secret) >= 16)
        if problem is None and short and (secret or not indirect):
            problem = _at((), "the token must be at least 16 characters")
        found = [problem] if problem else []
        scopes = data.get("scopes")
        if data.get("kinds") is not None and isinstance(scopes, list) and "ingest" not in scopes:
            found.append(
                _at(
                    ("kinds",),
                    "narrows what an ingest token may send: this token has no ingest scope",
                )
            )
        return found

    def token_record(self, n: int, given: Given) -> Token:
        secret, _ = _secret(self.model_dump(by_alias=True, exclude_unset=True), given)
        name = self.name if isinstance(self.name, str) else f"token-{n}"
        kinds = None if self.kinds is None else frozenset(self.kinds)
        return Token(name, secret, frozenset(self.scopes), kinds)


def _secret(item: Mapping[str, Any], given: Given) -> tuple[Any, InitErrorDetails | None]:
    """A token entry's secret, from where it says, and why it has none."""
    if "tokenEnv" in item:
        secret = given.env.get(str(item["tokenEnv"]))
        unset = _at(("tokenEnv",), f"the variable {item['tokenEnv']} is not set")
        return secret, None if secret else unset
    if "tokenFile" in item:
        text = given.files.get(str(item["tokenFile"]))
        if text is None:
            return None, _at(("tokenFile",), f"cannot read {item['tokenFile']}")
        return text.strip(), None
    return item.get("token"), None


def _path_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


class Tls(_Section):
    """HTTPS, with a PEM certificate (chain) and its key."""

    # Either file missing or not a path is one problem of the section's, as before.
    tls_cert_file: Annotated[str | None, BeforeValidator(_path_or_none)] = Field(
        CONFIG.tls_cert_file, alias="certFile"
    )
    tls_key_file: Annotated[str | None, BeforeValidator(_path_or_none)] = Field(
        CONFIG.tls_key_file, alias="keyFile"
    )

    @classmethod
    def problems(cls, data: Mapping[str, Any], given: Given) -> list[InitErrorDetails]:
        files = [data.get(k) for k in ("certFile", "keyFile")]
        if data and not all(isinstance(f, str) and f for f in files):
            return [_at((), "needs both certFile and keyFile (paths to PEM files)")]
        return []


def _external_url(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and _EXTERNAL.match(value)):
        return None
    return "must be an http(s) URL without query, e.g. https://sw.example"


def _network(value: str) -> bool:
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        return False
    return True


_EXTERNAL = re.compile(r"^https?://[^\s/?#]+(/[^\s?#]*)?$", re.IGNORECASE)
_HOST = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.\-]+)$")
_ORIGIN = re.compile(r"^https?://(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.\-]+)(:\d{1,5})?$", re.IGNORECASE)


class Server(_Section):
    """The HTTP server of `sidewatch serve`: its address, tokens, limits and exposure."""

    external_url: Annotated[
        str | None, _checked(_external_url), AfterValidator(lambda u: u and u.rstrip("/"))
    ] = Field(CONFIG.external_url, alias="externalUrl")
    listen: Annotated[str, _checked(listen_problem), WithJsonSchema({"type": "string"})] = Field(
        CONFIG.listen
    )
    request_timeout_ms: Annotated[Duration, _at_least(1000)] = Field(
        CONFIG.request_timeout_ms, alias="requestTimeout"
    )
    shutdown_timeout_ms: Annotated[Duration, _at_least(1000)] = Field(
        CONFIG.shutdown_timeout_ms, alias="shutdownTimeout"
    )
    tokens: Annotated[
        tuple[TokenEntry, ...],
        _Shape("must be a list of {name, scopes, kinds?, token | tokenEnv | tokenFile}"),
        BeforeValidator(_unset),
    ] = Field(CONFIG.tokens)
    protect_metrics: Annotated[Annotated[bool, Strict()] | None, _Rule("must be true or false")] = (
        Field(CONFIG.protect_metrics, alias="protectMetrics")
    )
    max_connections: Annotated[
        int, Strict(), Field(ge=1), _Rule("must be a number of connections, at least 1")
    ] = Field(CONFIG.max_connections, alias="maxConnections")
    allowed_hosts: Annotated[
        tuple[Annotated[str, Strict(), _must(_HOST.match)], ...],
        _Rule("must be a list of host names such as sw.example"),
        AfterValidator(lambda hosts: tuple(h.lower().strip("[]") for h in hosts)),
    ] = Field(CONFIG.allowed_hosts, alias="allowedHosts")
    allowed_origins: Annotated[
        tuple[Annotated[str, Strict(), _must(_ORIGIN.match)], ...],
        _Rule("must be a list of origins such as https://app.example"),
        AfterValidator(lambda origins: tuple(o.lower() for o in origins)),
    ] = Field(CONFIG.allowed_origins, alias="allowedOrigins")
    trusted_proxies: Annotated[
        tuple[Annotated[str, Strict(), _must(_network)], ...],
        _Rule("must be a list of addresses or CIDRs such as 10.0.0.0/8"),
        AfterValidator(
            lambda nets: tuple(str(ipaddress.ip_network(p, strict=False)) for p in nets)
        ),
    ] = Field(CONFIG.trusted_proxies, alias="trustedProxies")
    tls: Annotated[Tls, BeforeValidator(_unset_if_empty)] = Field(_yaml({}))
    allow_plaintext: Flag = Field(CONFIG.allow_plaintext, alias="allowPlaintext")
    max_body_bytes: Bytes = Field(CONFIG.max_body_bytes, alias="maxBodyBytes")
    max_inflated_bytes: Bytes = Field(CONFIG.max_inflated_bytes, alias="maxInflatedBytes")
    max_lines_per_unit: Annotated[
        int, Strict(), Field(ge=1), _Rule("must be a whole number of lines, at least 1")
    ] = Field(CONFIG.max_lines_per_unit, alias="maxLinesPerUnit")
    max_line_bytes: Bytes = Field(CONFIG.max_line_bytes, alias="maxLineBytes")

    @classmethod
    def problems(cls, data: Mapping[str, Any], given: Given) -> list[InitErrorDetails]:
        return [
            _at((), "must be at least 16 characters", path=var, after="tokens")
            for var in ENV_TOKENS
            if given.env.get(var) and len(given.env[var]) < 16
        ]

    def record(self, given: Given) -> dict[str, Any]:
        tokens = [t.token_record(n, given) for n, t in enumerate(self.tokens)]
        for var, scope in ENV_TOKENS.items():
            if len(given.env.get(var) or "") >= 16:
                tokens.append(Token(var.lower(), given.env[var], frozenset({scope})))
        return super().record(given) | {"tokens": tuple(tokens)}


# -- auditor, alertmanager, reports, nats, waits --------------------------------------------


class Auditor(_Section):
    """The scheduled auditor of `sidewatch serve`."""

    audit_interval_ms: Annotated[Duration, _at_least(1000)] = Field(
        CONFIG.audit_interval_ms, alias="interval"
    )


# An absolute http(s) URL (a dashboard's may carry a query): a pattern the JSON Schema holds too.
_DASHBOARD = r"^[hH][tT][tT][pP][sS]?://[^\s/?#]+([/?#]\S*)?$"


class Alertmanager(_Section):
    """Pushes one alert per problem wait to Alertmanager's v2 API (off without a url)."""

    alertmanager_url: Annotated[
        Annotated[str, Strict(), _must(lambda url: "://" in url)] | None,
        _Rule("must be a URL such as http://127.0.0.1:9093"),
    ] = Field(CONFIG.alertmanager_url, alias="url")
    alertmanager_max_per_push: Annotated[
        int, Strict(), Field(ge=1), _Rule("must be a whole number, at least 1")
    ] = Field(CONFIG.alertmanager_max_per_push, alias="maxAlertsPerPush")
    alertmanager_resend_ms: Duration = Field(CONFIG.alertmanager_resend_ms, alias="resendInterval")
    alertmanager_dashboard_url: Annotated[
        Annotated[str, Strict(), Field(pattern=_DASHBOARD)] | None,
        _Rule("must be an absolute http(s) URL such as https://grafana.example/d/sidewatch"),
    ] = Field(CONFIG.alertmanager_dashboard_url, alias="dashboardUrl")


def _schedule(value: Any) -> str | None:
    """A 5-field cron the parser `serve` schedules the nightly report with would accept
    (APScheduler's own words: "Error validating expression '61'"); null is off."""
    if value is None:
        return None
    if not isinstance(value, str) or len(value.split()) != 5:
        return "must be a 5-field cron expression, or null for off"
    from apscheduler.triggers.cron import CronTrigger  # noqa: PLC0415 (only with a schedule)

    try:
        CronTrigger.from_crontab(value, timezone="UTC")
    except ValueError as e:
        return f"{value!r} is not a valid cron expression: {e}"
    return None


class Reports(_Section):
    """The nightly audit report (also `sidewatch report`)."""

    report_schedule: Annotated[
        str | None, _checked(_schedule), WithJsonSchema({"type": ["string", "null"]})
    ] = Field(CONFIG.report_schedule, alias="schedule")
    report_directory: Annotated[NonEmpty, _Rule("must be a path")] = Field(
        CONFIG.report_directory, alias="directory"
    )
    report_formats: Annotated[
        tuple[Literal["md", "html", "json"], ...],
        Field(min_length=1),
        _Rule("must be a list of md, html, json"),
    ] = Field(CONFIG.report_formats, alias="formats")
    report_window_ms: Duration = Field(CONFIG.report_window_ms, alias="window")
    report_retention_ms: Duration = Field(CONFIG.report_retention_ms, alias="retention")


def _nats_url(value: Any) -> str | None:
    if value is None:
        return "required to ingest from JetStream (or remove the section)"
    if not isinstance(value, str) or not value.startswith(NATS_SCHEMES):
        return "must be a URL such as nats://127.0.0.1:4222"  # never the value: a password
    return None


_NATS_NAME = r"^[A-Za-z0-9_-]{1,128}$"


class Nats(_Section):
    """Ingest from a NATS JetStream stream as well (off without the section)."""

    url: Annotated[str | None, _checked(_nats_url), WithJsonSchema({"type": "string"})] = None
    stream: Annotated[
        str,
        Strict(),
        Field(pattern=_NATS_NAME),
        _Rule("required, the name of an existing stream: 1 to 128 letters, digits, _ or -"),
    ]
    durable: Annotated[
        str,
        Strict(),
        Field(pattern=_NATS_NAME),
        _Rule("the durable consumer's name: 1 to 128 letters, digits, _ or -"),
    ] = Field(NATS.durable)
    subject: Annotated[
        Annotated[str, Strict(), _must(lambda s: s and not any(c.isspace() for c in s))] | None,
        _Rule("must be a subject such as agui.> (no spaces), or unset"),
    ] = Field(NATS.subject)
    batch: Annotated[
        int,
        Strict(),
        Field(ge=1, le=1000),
        _Rule("must be a whole number of messages from 1 to 1000"),
    ] = Field(NATS.batch)
    ack_wait_ms: Annotated[Duration, _at_least(1000)] = Field(NATS.ack_wait_ms, alias="ackWait")
    retry_delay_ms: Annotated[Duration, _at_least(100, "100ms")] = Field(
        NATS.retry_delay_ms, alias="retryDelay"
    )


class Waits(_Section):
    """How waits are read."""

    frontend_tools: ToolGlobs = Field(CONFIG.frontend_tools, alias="frontendTools")


# -- the file -------------------------------------------------------------------------------


class ConfigFile(_Section):
    """sidewatch's config.yaml. Every key is optional."""

    model_config = ConfigDict(title="sidewatch configuration")

    store: Annotated[Store, BeforeValidator(_unset_if_empty)] = Field(_yaml({}))
    privacy: Annotated[Privacy, BeforeValidator(_unset_if_empty)] = Field(_yaml({}))
    policies: Annotated[
        tuple[PolicyEntry, ...],
        Field(min_length=1),
        _Shape("must be a non-empty list (first match wins, last is default)"),
        BeforeValidator(_unset),
    ] = Field(_yaml([{"name": p.name} for p in Config().policies]))  # other keys: defaults
    server: Annotated[Server, BeforeValidator(_unset_if_empty)] = Field(_yaml({}))
    auditor: Annotated[Auditor, BeforeValidator(_unset_if_empty)] = Field(_yaml({}))
    alertmanager: Annotated[Alertmanager, BeforeValidator(_unset_if_empty)] = Field(_yaml({}))
    reports: Annotated[Reports, BeforeValidator(_unset_if_empty)] = Field(_yaml({}))
    nats: Annotated[Nats | None, BeforeValidator(lambda v: v or None)] = Field(CONFIG.nats)
    waits: Annotated[Waits, BeforeValidator(_unset_if_empty)] = Field(_yaml({}))

    @classmethod
    def _unknown(cls) -> str:
        return f"unknown key (known: {', '.join(sorted(cls._keys()))})"

    @field_validator("policies", mode="wrap")
    @classmethod
    def _policies_agree(cls, raw: Any, handler: core_schema.ValidatorFunctionWrapHandler) -> Any:
        found: list[InitErrorDetails] = []
        try:
            value = handler(raw)
        except ValidationError as e:
            found = [PolicyEntry._worded(err) for err in e.errors()]
        if isinstance(raw, list):
            found += _policy_problems(raw)
        if found:
            raise ValidationError.from_exception_data("policies", sorted(found, key=_policy_rank))
        return value

    def record(self, given: Given) -> dict[str, Any]:
        out: dict[str, Any] = {
            "policies": tuple(p.policy() for p in self.policies),
            "nats": self.nats and NatsSource(**self.nats.record(given)),
        }
        for name in type(self).model_fields.keys() - out.keys():
            out |= getattr(self, name).record(given)
        return out


def _policy_rank(err: InitErrorDetails) -> tuple[float, tuple[float, str]]:
    """A policy's problems in the order of its keys, policy by policy; then the list's own."""
    loc = err["loc"]
    if not loc or not isinstance(loc[0], int):
        return (float("inf"), (0, ""))
    return (loc[0], PolicyEntry._rank({**err, "loc": loc[1:]}))


def parse(
    data: Mapping[str, Any] | None,
    env: Mapping[str, str],
    source: str,
    files: Mapping[str, str | None],
) -> Config:
    """The `Config` of a parsed file (see `sidewatch.config.load_config`)."""
    data = data or {}
    if not isinstance(data, Mapping):
        raise ConfigError(["the file must hold a mapping at its top level"], source)
    nats = data.get("nats")
    if env.get(ENV_NATS_URL) and (isinstance(nats, Mapping) or not nats):
        data = {**data, "nats": {**(nats or {}), "url": env[ENV_NATS_URL]}}
    given = Given(env, files)
    try:
        parsed = ConfigFile.model_validate(data, context=given)
    except ValidationError as e:
        raise ConfigError([_line(err, data) for err in e.errors()], source) from None
    return Config(**parsed.record(given))


def _line(err: Any, data: Mapping[str, Any]) -> str:
    """A problem as one line: its key path (a policy named beside its index), its words."""
    path = (err.get("ctx") or {}).get("path")
    if path is None:
        path = ""
        for n, key in enumerate(err["loc"]):
            path += f"[{key}]" if isinstance(key, int) and n else f".{key}" if n else str(key)
            if n == 1 and err["loc"][0] == "policies" and err["loc"][2:3] != ("name",):
                item = data["policies"][key]
                if isinstance(item, Mapping):
                    name = item.get("name")
                    path += f" ({name if isinstance(name, str) and name else f'policy-{key}'})"
    return f"{path}: {err['msg']}"


# -- check-config --schema ------------------------------------------------------------------


class _Schema(GenerateJsonSchema):
    def field_title_should_be_set(self, schema: Any) -> bool:
        return False  # a key's title would only repeat the key


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of config.yaml, for editors."""
    schema = ConfigFile.model_json_schema(by_alias=True, schema_generator=_Schema)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}
