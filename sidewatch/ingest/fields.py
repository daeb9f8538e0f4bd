"""The checks of one line's fields, shared by the grammar and the producers' dialects: a field
that is missing, of the wrong type or unfit to store raises `LineError`, which the interpreter
turns into the line's `Reject` (its wording never quotes the line)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from sidewatch.core.vocab import RejectReason
from sidewatch.ingest.bounds import ID_MAX, TIME_RANGE, id_problem, time_ok

if TYPE_CHECKING:
    from ag_ui.core import RunAgentInput
    from pydantic import BaseModel

M = TypeVar("M", bound="BaseModel")


class LineError(Exception):
    """A line that is rejected: a bounded reason and one line for a person."""

    def __init__(self, reason: RejectReason, error: str) -> None:
        super().__init__(error)
        self.reason, self.error = reason, error


def need(obj: dict[str, Any], key: str, what: str) -> str:
    """A required string field, checked by hand on the hot path (pydantic's wording)."""
    v = obj.get(key)
    if isinstance(v, str):
        return v
    problem = "Field required" if v is None else "Input should be a valid string"
    raise LineError(RejectReason.INVALID_FIELD, f"{what}: {key}: {problem}")


def stored_id(obj: dict[str, Any], key: str, what: str) -> str:
    """A required id or name that is stored: a string within the id rules."""
    return checked(need(obj, key, what), f"{what}: {key}")


def checked(value: str, where: str, limit: int = ID_MAX) -> str:
    """`value`, if it is fit to store as an id of at most `limit` characters."""
    problem = id_problem(value, limit)
    if problem is not None:
        raise LineError(RejectReason.INVALID_ID, f"{where}: {problem}")
    return value


def checked_or_none(value: str | None, where: str, limit: int = ID_MAX) -> None:
    """`checked`, for a value that may be absent."""
    if value is not None:
        checked(value, where, limit)


def check_expiry(raw: str | None, where: str) -> None:
    """An `expiresAt` that parses but lies outside the stored range rejects its line; one
    that does not parse is the spec's finding (`expires_at_unparsable`), not a reject."""
    if raw is None:
        return
    expires = parse_time(raw)
    if expires is not None and not time_ok(expires):
        raise LineError(RejectReason.TIME_OUT_OF_RANGE, f"{where}: must be a time {TIME_RANGE}")


def parse_time(text: str) -> int | None:
    """An ISO 8601 time as ms since the epoch (a zone-less one read as UTC), else None."""
    try:
        dt = datetime.fromisoformat(text.strip())
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)  # a zone-less time is read as UTC
        return int(dt.timestamp() * 1000)
    except (ValueError, OverflowError):
        return None


def str_or_none(v: Any) -> str | None:
    """A string, else None."""
    return v if isinstance(v, str) else None


# Pydantic's messages of these error types are made of the schema alone (expected types,
# literals, lengths); the others may quote the input (a union's tag, a validator's words),
# so only their type is said. No AG-UI model has a map of models, so a location holds field
# names, list indices and union tags the schema knows, never a key of the input.
_SCHEMA_ONLY_MESSAGES = frozenset(
    {
        "missing",
        "extra_forbidden",
        "string_type",
        "int_type",
        "float_type",
        "bool_type",
        "dict_type",
        "list_type",
        "model_type",
        "model_attributes_type",
        "dataclass_type",
        "is_instance_of",
        "none_required",
        "literal_error",
        "enum",
        "int_parsing",
        "int_from_float",
        "float_parsing",
        "bool_parsing",
        "finite_number",
        "too_short",
        "too_long",
        "string_too_short",
        "string_too_long",
        "string_pattern_mismatch",
        "string_unicode",
        "union_tag_not_found",
        "greater_than",
        "greater_than_equal",
        "less_than",
        "less_than_equal",
    }
)


def valid(model: type[M], obj: Any, what: str) -> M:
    """`obj` validated as an ag-ui `model`; the first error worded without the input."""
    from pydantic import ValidationError  # noqa: PLC0415 (imported with the models)

    try:
        return model.model_validate(obj)
    except ValidationError as e:
        errors = e.errors(include_input=False, include_url=False)
        err = errors[0]
        where = ".".join(str(p) for p in err["loc"]) or "value"
        ctx = err.get("ctx", {})
        if err["type"] in _SCHEMA_ONLY_MESSAGES:
            rule = err["msg"]
        elif err["type"] == "union_tag_invalid":  # the tag's name and the expected ones
            rule = f"{ctx['discriminator']} should be one of {ctx['expected_tags']}"
        else:
            rule = f"invalid ({err['type']})"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise LineError(RejectReason.INVALID_FIELD, f"{what}: {where}: {rule}{more}") from None


def run_agent_input(obj: Any, what: str) -> RunAgentInput:
    """A `RunAgentInput`, validated (pydantic is imported only for an input)."""
    from ag_ui.core import RunAgentInput as Model  # noqa: PLC0415 (pydantic: only for an input)

    return valid(Model, obj, what)
