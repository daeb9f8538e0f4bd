"""The W3C trace context checks (`ingest.tracectx`): the one-match fast paths for what tracers
send agree with the full grammar on every string, and the full grammar still decides the rest."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from sidewatch.ingest import tracectx
from sidewatch.ingest.tracectx import valid_traceparent, valid_tracestate


def full_tracestate(value: str) -> bool:
    """The grammar alone, without the fast path."""
    return (
        len(value) <= tracectx.TRACESTATE_MAX
        and value.count("=") <= tracectx.TRACESTATE_MEMBERS
        and tracectx._STATE.match(value) is not None
    )


def full_traceparent(value: str) -> bool:
    m = tracectx._PARENT.match(value)
    if m is None:
        return False
    version, trace, span, _, rest = m.groups()
    if version == "ff" or trace == "0" * 32 or span == "0" * 16:
        return False
    return rest is None if version == "00" else True


# What tracestate lists are made of, weighted to the edges: separators, spaces, `@`, `=`.
_STATE_CHARS = st.sampled_from([*"ab09_-*/@=, \t~!;:", "\x7f", "é", "A"])
_KEYS = st.text(st.sampled_from(list("az09_-*/")), min_size=1, max_size=300)


@settings(max_examples=3000)
@given(st.text(_STATE_CHARS, max_size=80))
@example("a=1,b=2")
@example("a=1,,b=2")  # an empty member: valid, and only by the full grammar
@example("a=1 ,b=2")  # whitespace around a comma: the same
@example("a=b c")  # a space inside a value
@example("a=b ")  # a trailing space: valid (list whitespace)
@example("t@v=1")  # a multi-tenant key
@example("A=1")  # an upper-case key: never valid
def test_the_tracestate_fast_path_agrees_with_the_grammar(value: str) -> None:
    assert valid_tracestate(value) == full_tracestate(value)


@given(st.lists(st.tuples(_KEYS, st.text(st.sampled_from("xy=!"), min_size=1, max_size=40))))
def test_long_keys_and_many_members_are_decided_as_the_grammar_decides(
    members: list[tuple[str, str]],
) -> None:
    value = ",".join(f"{k}={v}" for k, v in members)
    assert valid_tracestate(value) == full_tracestate(value)


def test_the_bounds_hold_on_the_fast_path() -> None:
    assert valid_tracestate(",".join(f"k{n}=v" for n in range(32)))
    assert not valid_tracestate(",".join(f"k{n}=v" for n in range(33)))  # 33 members
    assert valid_tracestate("k" * 256 + "=v")  # the longest simple key
    assert not valid_tracestate("k" * 257 + "=v")
    assert not valid_tracestate("k=" + "v" * 257)  # a value over 256 characters
    assert not valid_tracestate("k=" + "v" * 600)  # the list over 512 characters


_PARENT_CHARS = st.sampled_from(list("0123456789abcdefABf-x"))


@settings(max_examples=3000)
@given(
    st.one_of(
        st.text(_PARENT_CHARS, max_size=60),
        st.builds(
            lambda v, t, s, f, rest: f"{v}-{t}-{s}-{f}{rest}",
            st.sampled_from(["00", "01", "ff", "0g"]),
            st.sampled_from(["0" * 32, "4bf92f3577b34da6a3ce929d0e0e4736", "A" * 32]),
            st.sampled_from(["0" * 16, "00f067aa0ba902b7", "00f067aa0ba902b"]),
            st.sampled_from(["00", "01", "1"]),
            st.sampled_from(["", "-", "-more", "\n"]),
        ),
    )
)
def test_the_traceparent_fast_path_agrees_with_the_grammar(value: str) -> None:
    assert valid_traceparent(value) == full_traceparent(value)
