"""A run's W3C trace context: `traceparent` and `tracestate`, top-level fields of a
`RunAgentInput` or `RUN_STARTED` line (a tee adds them from the run's request, the tap from
its headers or the agent's active OpenTelemetry span).

They are identifiers, not content: the trace id and span id of the run's request, and the
vendors' opaque `tracestate` entries. A value that is not one (W3C Trace Context, level 1) is
ignored with the finding `trace_context_malformed`, never a reject of the line: a tracing
mistake of the producer costs its trace, never its approvals. A malformed `tracestate` beside a
valid `traceparent` is dropped alone (the specification's own rule). A `tracestate` without a
`traceparent` means nothing and is ignored.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from sidewatch.core.facts import Fact, FindingFact, RunTraceFact
from sidewatch.core.vocab import FindingRule

TRACESTATE_MAX = 512  # what every vendor must propagate; the store's column
TRACESTATE_MEMBERS = 32
# version 00 exactly; a later version (not ff) may append fields after a `-`
_PARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?\Z", re.S)
_PARENT_00 = re.compile(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}\Z")
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16
_KEY = r"(?:[a-z][_0-9a-z\-*/]{0,255}|[a-z0-9][_0-9a-z\-*/]{0,240}@[a-z][_0-9a-z\-*/]{0,13})"
_VALUE = r"[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]"
_MEMBER = f"(?:{_KEY}={_VALUE})"
# Members of a short `tracestate` (at most 256 characters: no key or value can pass its bound)
# with simple keys and values without spaces, no empty members: what tracers send. It matches
# only lists the full grammar below accepts; a list it misses is read by the full grammar.
_SHORT = 256
_PLAIN_MEMBER = r"[a-z][_0-9a-z\-*/]*=[\x21-\x2b\x2d-\x3c\x3e-\x7e]+"
_PLAIN_STATE = re.compile(rf"{_PLAIN_MEMBER}(?:,{_PLAIN_MEMBER}){{0,31}}\Z")
# A list of members (empty ones allowed), optional whitespace around each comma: one match.
_STATE = re.compile(rf"[ \t]*{_MEMBER}?(?:[ \t]*,[ \t]*{_MEMBER}?)*[ \t]*\Z")


def valid_traceparent(value: object) -> bool:
    """Whether `value` is a W3C `traceparent` (version 00, or a later one read as 00)."""
    if not isinstance(value, str):
        return False
    if _PARENT_00.match(value) is not None:  # what every tracer sends: one match, no groups
        return value[3:35] != _ZERO_TRACE and value[36:52] != _ZERO_SPAN
    m = _PARENT.match(value)
    if m is None:
        return False
    version, trace, span, _, rest = m.groups()
    if version == "ff" or trace == _ZERO_TRACE or span == _ZERO_SPAN:
        return False
    return rest is None if version == "00" else True


def valid_tracestate(value: object) -> bool:
    """Whether `value` is a W3C `tracestate` list (at most 32 members, 512 characters). A
    key named twice is not looked for: the vendors' own parsers keep the first."""
    if not isinstance(value, str):
        return False
    if len(value) <= _SHORT and _PLAIN_STATE.match(value) is not None:
        return True  # what tracers send, in one short match
    return (
        len(value) <= TRACESTATE_MAX
        and value.count("=") <= TRACESTATE_MEMBERS  # one `=` a member: values hold none
        and _STATE.match(value) is not None
    )


class TraceReader:
    """A unit's reading of trace contexts: a run's context is read once a unit (its input and
    its `RUN_STARTED` usually carry the same one; the first one stored wins anyway)."""

    def __init__(self) -> None:
        self.read: set[tuple[str, str]] = set()  # (thread, run) whose context this unit read

    def facts(
        self, obj: dict[str, Any], thread: str, run: str, at: int, seq: int
    ) -> Sequence[Fact]:
        """The run's trace context on line `obj`, or the finding that it is malformed; none
        when the line carries no `traceparent` (the common case: one dictionary lookup)."""
        parent = obj.get("traceparent")
        if parent is None:
            return _NONE
        key = (thread, run)
        if key in self.read:
            return _NONE
        if not valid_traceparent(parent):
            return (_malformed(thread, run, at, seq),)
        self.read.add(key)
        state = obj.get("tracestate")
        out: list[Fact] = []
        if state is not None and not valid_tracestate(state):
            out.append(_malformed(thread, run, at, seq))
            state = None
        # Version 00's fields only: a later version's extra fields are not kept.
        out.append(
            RunTraceFact(
                thread_id=thread,
                run_id=run,
                traceparent=parent[:55],
                tracestate=state or None,
                at=at,
                seq=seq,
            )
        )
        return out


_NONE: tuple[Fact, ...] = ()


def _malformed(thread: str, run: str, at: int, seq: int) -> FindingFact:
    return FindingFact(
        rule=FindingRule.TRACE_CONTEXT_MALFORMED, at=at, seq=seq, thread_id=thread, run_id=run
    )
