"""The text safety of the outputs: control and format characters out, lengths capped with a
visible ellipsis, alert labels unique when cut, and Markdown that renders as the value itself
(read back with a real CommonMark parser)."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from sidewatch.core.text import AT, cap, clean, label, md_code, md_text, safe

UNSAFE = {"Cc", "Cf", "Zl", "Zp", "Cs"}
MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])


def unsafe_in(text: str) -> list[str]:
    return [hex(ord(c)) for c in text if unicodedata.category(c) in UNSAFE]


def inline(markdown: str) -> list[tuple[str, str]]:
    """The one paragraph `markdown` renders as: its inline tokens' (type, content)."""
    tokens = MD.parse(markdown)
    assert ["paragraph_open", "inline", "paragraph_close"] == [t.type for t in tokens]
    return [(t.type, t.content) for t in tokens[1].children or []]


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain ascii", "plain ascii"),
        ("a\nb\rc\td\u2028e\u2029f\x85g", "a b c d e f g"),
        ("nul\x00 esc\x1b[31m del\x7f c1\x9b", "nul\ufffd esc\ufffd[31m del\ufffd c1\ufffd"),
        ("bidi\u202eevil\u202c iso\u2066x\u2069", "bidi\ufffdevil\ufffd iso\ufffdx\ufffd"),
        ("zw\u200bsp\u200dj\ufeffbom", "zw\ufffdsp\ufffdj\ufffdbom"),
        ("lone \ud800 surrogate", "lone \ufffd surrogate"),
        ("ünïcödé 名前 🚀", "ünïcödé 名前 🚀"),
    ],
    ids=["ascii", "line breaks", "controls", "bidi", "zero-width", "surrogate", "unicode"],
)
def test_clean_replaces_control_and_format_characters(raw: str, shown: str) -> None:
    assert shown == clean(raw)


def test_cap_shows_the_cut_with_an_ellipsis() -> None:
    assert ("abc", "abcd", "abc\N{HORIZONTAL ELLIPSIS}") == (
        cap("abc", 4),
        cap("abcd", 4),
        cap("abcde", 4),
    )


def test_a_short_clean_label_is_the_value_itself() -> None:
    assert "thread-deploy/int-deploy" == label("thread-deploy/int-deploy")


def test_a_long_label_is_cut_to_its_limit_with_a_hash_that_keeps_it_unique() -> None:
    a, b = "t" * 300 + "/a", "t" * 300 + "/b"

    la, lb = label(a), label(b)

    assert (128, 128) == (len(la), len(lb))
    assert la != lb
    assert la.startswith("t" * 115 + "\N{HORIZONTAL ELLIPSIS}")
    assert label(a) == la  # stable across pushes: the alert keeps its identity


def test_a_cleaned_label_carries_a_hash_so_two_ids_cleaned_alike_stay_apart() -> None:
    assert label("n\x00") != label("n\x01")
    assert label("n\x00").startswith("n\ufffd\N{HORIZONTAL ELLIPSIS}")


HOSTILE = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "`",
                "``",
                "# h",
                "![i](https://evil.example/p.png)",
                "[c](javascript:alert(1))",
                "<script>alert(1)</script>",
                "@channel",
                "\r\n",
                "\u2028",
                "\u202e",
                "\x00",
                "|",
                "\\",
                "&amp;",
                "    ",
                "- ",
                "1. ",
                "*",
                "_",
            ]
        ),
        st.text(min_size=1, max_size=4),
    ),
    min_size=1,
    max_size=8,
).map("".join)


@given(HOSTILE, st.integers(min_value=1, max_value=300))
def test_a_label_is_clean_capped_and_the_same_for_the_same_value(value: str, n: int) -> None:
    shown = label(value * n)

    assert len(shown) <= 128
    assert [] == unsafe_in(shown)
    assert label(value * n) == shown


@given(HOSTILE)
def test_a_code_span_renders_as_the_clean_value_and_nothing_else(value: str) -> None:
    expected = safe(value, 200).replace("@", AT)

    tokens = inline(f"x {md_code(value)} y")

    if expected.strip(" "):
        assert [("text", "x "), ("code_inline", expected), ("text", " y")] == tokens
    assert "@" not in md_code(value)


@given(HOSTILE)
def test_markdown_text_renders_as_the_clean_value_as_plain_text(value: str) -> None:
    expected = safe(value, 200).strip().replace("@", AT)
    if not expected:
        return

    tokens = inline(md_text(value))

    assert [("text", expected)] == [(t, c) for t, c in tokens if t != "softbreak"]
    assert "<" not in md_text(value)
