"""The Markdown report read back with a CommonMark (GFM tables) parser: a producer's strings
stay the values they are, never a heading, image, link, HTML, mention or another table row."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from sidewatch.report.markdown import render_markdown

SEED = Path(__file__).resolve().parents[1] / "fixtures" / "report-seed.json"
MD = MarkdownIt("commonmark").enable(["table"])
# The review's request id: it closes its code span, then a heading, an outside image, a mention.
ESCAPE = "x`\n\n# Owned\n\n![p](https://evil.example/p.png) @channel\n\n`"


@pytest.fixture
def report() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SEED.read_text())
    return data


def flat(tokens: list[Token]) -> list[Token]:
    return [x for t in tokens for x in (t, *flat(t.children or []))]


def section(md: str, title: str) -> list[Token]:
    """The tokens of the report's section `title`, parsed alone."""
    start = md.index(f"## {title}")
    end = md.find("\n## ", start + 1)
    return flat(MD.parse(md[start : end if end > 0 else None]))


def test_a_request_id_cannot_leave_its_code_span(report: dict[str, Any]) -> None:
    report["problemWaits"][0]["requestId"] = ESCAPE
    report["longestWaits"][0]["requestId"] = ESCAPE

    md = render_markdown(report)
    tokens = flat(MD.parse(md))

    assert ["h1"] == [t.tag for t in tokens if t.type == "heading_open" and t.tag == "h1"]
    assert [] == [t.type for t in tokens if t.type in {"image", "link_open", "html_inline"}]
    assert "@channel" not in md
    shown = "x`  # Owned  ![p](https://evil.example/p.png) \N{FULLWIDTH COMMERCIAL AT}channel  `"
    assert 2 == [t.content for t in tokens if t.type == "code_inline"].count(shown)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("<script>alert(1)</script>", "<script>alert(1)</script>"),
        ("[click](javascript:alert(1))", "[click](javascript:alert(1))"),
        ("a\rb", "a b"),
        ("a\u2028b", "a b"),
        ("evil\u202etxt.exe", "evil\ufffdtxt.exe"),
        ("a | b | c", "a | b | c"),
        ("x" * 300, "x" * 199 + "\N{HORIZONTAL ELLIPSIS}"),
    ],
    ids=["script", "javascript link", "CR", "U+2028", "bidi override", "pipes", "long"],
)
@pytest.mark.parametrize("field", ["action", "reason", "approverRef"])
def test_action_reason_and_approver_are_inert_and_keep_their_cell(
    report: dict[str, Any], field: str, value: str, shown: str
) -> None:
    wait = report["problemWaits"][0]
    (wait["evidence"] if field == "approverRef" else wait)[field] = value
    report["longestWaits"][0]["action"] = value

    md = render_markdown(report)
    tokens = flat(MD.parse(md))
    longest = section(md, "Longest open waits")

    assert [] == [t.type for t in tokens if t.type in {"html_inline", "html_block", "link_open"}]
    assert not any(c in md for c in "\r\u2028\u202e")
    assert shown in [t.content for t in tokens if t.type == "code_inline"]
    assert len(report["longestWaits"]) + 1 == sum(t.type == "tr_open" for t in longest)
    first_row = [t for t in longest if t.type == "inline"][7:13]  # the heading, the head row
    assert shown == first_row[5].children[0].content  # type: ignore[index]


def test_with_the_external_url_each_wait_links_to_its_page(report: dict[str, Any]) -> None:
    rid = "thread a/int@run-1 (x)"
    report["problemWaits"][0]["requestId"] = rid
    report["longestWaits"][0]["requestId"] = rid

    md = render_markdown(report, "https://sw.example/base/")
    tokens = flat(MD.parse(md))
    links = [t.attrGet("href") for t in tokens if t.type == "link_open"]
    plain = render_markdown(report)

    page = "https://sw.example/base/ui/waits/thread%20a%2Fint@run-1%20%28x%29"
    assert [page, page] == [h for h in links if h == page]
    assert all(str(h).startswith("https://sw.example/base/ui/waits/") for h in links)
    assert len(links) == len(report["problemWaits"]) + len(report["longestWaits"]) + min(
        len(report.get("changedWaits", [])), 500
    )
    assert [] == [t for t in flat(MD.parse(plain)) if t.type == "link_open"]
    assert "/ui/waits/" not in plain


def test_a_linked_request_id_stays_one_code_span(report: dict[str, Any]) -> None:
    report["problemWaits"][0]["requestId"] = ESCAPE

    tokens = flat(MD.parse(render_markdown(report, "https://sw.example")))

    assert ["h1"] == [t.tag for t in tokens if t.type == "heading_open" and t.tag == "h1"]
    assert [] == [t.type for t in tokens if t.type in {"image", "html_inline"}]
    shown = "x`  # Owned  ![p](https://evil.example/p.png) \N{FULLWIDTH COMMERCIAL AT}channel  `"
    assert shown in [t.content for t in tokens if t.type == "code_inline"]
