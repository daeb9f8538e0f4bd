"""The values config.yaml's keys take, and sidewatch's own checks of them (durations, globs,
addresses, cron, a token's secret): a check's problem is said in sidewatch's words (error type
`sidewatch`); each default is read from the record the key fills, as the file spells it."""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from collections.abc import Callable, Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, PlainValidator, Strict, WithJsonSchema
from pydantic_core import PydanticCustomError, PydanticUseDefault

from sidewatch.config import INGEST_KINDS, NATS_SCHEMES, Config, NatsSource, parse_duration
from sidewatch.core.policy import DEFAULT_THRESHOLDS, Policy


@dataclasses.dataclass(frozen=True, slots=True)
class Given:
    """What a file may refer to besides itself: the environment (`tokenEnv`) and the token
    files the shell read (`tokenFile`: path -> content, None when unreadable)."""

    env: Mapping[str, str]
    files: Mapping[str, str | None]


@dataclasses.dataclass(frozen=True, slots=True)
class Problem:
    """A problem no one key's type shows (`config_rules`): at the key path `loc`, listed with
    the problems of `rank` (default: `loc`), shown under `shown` (default: `loc`)."""

    loc: tuple[int | str, ...]
    text: str
    rank: tuple[int | str | float, ...] | None = None
    shown: str | None = None


# -- defaults as the file spells them ------------------------------------------------------


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
            return spelled(value)
        return list(value) if isinstance(value, tuple) else value


def spelled(ms: int) -> str:
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

# -- value types: a check of sidewatch's own says its problem in its own words ---------------


def problem(text: str) -> PydanticCustomError:
    """A value's problem in sidewatch's words (error type `sidewatch`), shown as it is."""
    return PydanticCustomError("sidewatch", text)


def checked(find: Callable[[Any], str | None]) -> BeforeValidator:
    """The value is refused with the problem `find` finds in it (None: none)."""

    def validate(value: Any) -> Any:
        if (text := find(value)) is not None:
            raise problem(text)
        return value

    return BeforeValidator(validate)


def must(ok: Callable[[Any], object]) -> AfterValidator:
    """A value `ok` refuses fails as its type would: its key's form says what it must be."""

    def validate(value: Any) -> Any:
        if not ok(value):
            raise ValueError(value)
        return value

    return AfterValidator(validate)


def unset(value: Any) -> Any:
    """null is the key's default."""
    if value is None:
        raise PydanticUseDefault
    return value


def unset_if_empty(value: Any) -> Any:
    """null, or any other empty value but a mapping, is the section's default."""
    if value is None or (not value and not isinstance(value, Mapping)):
        raise PydanticUseDefault
    return value


def _duration_ms(value: Any) -> int:
    try:
        return parse_duration(value)
    except ValueError as e:
        raise problem(str(e)) from None


def at_least(ms: int, spelled_as: str | None = None) -> AfterValidator:
    def validate(value: int) -> int:
        if value < ms:
            raise problem(f"must be at least {spelled_as or f'{ms / 1000:g}s'}")
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
Flag = Annotated[bool, Strict()]
Count = Annotated[int, Strict(), Field(ge=1)]
NonEmpty = Annotated[str, Strict(), Field(min_length=1)]
Bytes = Annotated[int, Strict(), Field(ge=1024)]
BYTES = "a number of bytes, at least 1024"
GLOBS = "a list of glob patterns"


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
        raise problem(f"{bad[0]!r} is not a glob pattern: a '[' in it is never closed")
    return patterns


Globs = tuple[NonEmpty, ...]
# Glob patterns of tool names whose every pattern means what it says (`check-config` refuses
# one fnmatch would read as a literal `[`).
ToolGlobs = Annotated[Globs, AfterValidator(_tool_globs)]


# -- server, reports, nats ------------------------------------------------------------------


def kinds_problem(value: Any) -> str | None:
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


def token_secret(item: Mapping[str, Any], given: Given) -> tuple[Any, Problem | None]:
    """A token entry's secret, from where it says, and why it has none."""
    if "tokenEnv" in item:
        secret = given.env.get(str(item["tokenEnv"]))
        unset = Problem(("tokenEnv",), f"the variable {item['tokenEnv']} is not set")
        return secret, None if secret else unset
    if "tokenFile" in item:
        text = given.files.get(str(item["tokenFile"]))
        if text is None:
            return None, Problem(("tokenFile",), f"cannot read {item['tokenFile']}")
        return text.strip(), None
    return item.get("token"), None


def path_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def external_url_problem(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and _EXTERNAL.match(value)):
        return None
    return "must be an http(s) URL without query, e.g. https://sw.example"


def is_network(value: str) -> bool:
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        return False
    return True


_EXTERNAL = re.compile(r"^https?://[^\s/?#]+(/[^\s?#]*)?$", re.IGNORECASE)
HOST = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.\-]+)$")
ORIGIN = re.compile(r"^https?://(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.\-]+)(:\d{1,5})?$", re.IGNORECASE)
# An absolute http(s) URL (a dashboard's may carry a query): a pattern the JSON Schema holds too.
DASHBOARD = r"^[hH][tT][tT][pP][sS]?://[^\s/?#]+([/?#]\S*)?$"


def schedule_problem(value: Any) -> str | None:
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


def nats_url_problem(value: Any) -> str | None:
    if value is None:
        return "required to ingest from JetStream (or remove the section)"
    if not isinstance(value, str) or not value.startswith(NATS_SCHEMES):
        return "must be a URL such as nats://127.0.0.1:4222"  # never the value: a password
    return None


NatsName = Annotated[str, Strict(), Field(pattern=r"^[A-Za-z0-9_-]{1,128}$")]
