"""Hostile strings in every id and name field reach no output as markup or control: the
Markdown report (read back with a CommonMark parser), the HTML report (with the standard
library's parser), the JSON report, the Alertmanager body, the log lines, and the audit table
and verdict JSON of `sidewatch audit` and the read API. The store may
hold anything a producer sent before ingest got stricter; every output must survive it."""

from __future__ import annotations

import copy
import json
import logging
import unicodedata
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.token import Token

from sidewatch.app.report import render
from sidewatch.core.health import classify
from sidewatch.core.model import WaitEvidence
from sidewatch.core.policy import DEFAULT_POLICY
from sidewatch.core.text import AT, label, safe
from sidewatch.daemon.logs import LOG_MESSAGE_LIMIT, JsonLogs
from sidewatch.exporters.alertmanager import NO_ID, AlertmanagerPush, ProblemWait
from sidewatch.report.verdicts import audit_table, verdict_json

SEED: dict[str, Any] = json.loads(
    (Path(__file__).parent / "fixtures" / "report-seed.json").read_text()
)
UNSAFE = {"Cc", "Cf", "Zl", "Zp", "Cs"}
MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])
FRAGMENTS = [
    "`",
    "```",
    "# heading",
    "\n# heading\n",
    "![x](https://evil.example/p.png)",
    "[click](javascript:alert(1))",
    "<https://evil.example>",
    "<script>alert(1)</script>",
    '<img src=x onerror="alert(1)">',
    '"><a href="javascript:alert(1)">',
    "javascript:",
    "@channel",
    "@here",
    "<!channel>",
    "\r",
    "\n",
    "\r\n\r\n",
    "\u2028",
    "\u2029",
    "\u202e",
    "\u2066",
    "\x00",
    "\x1b[2J",
    "\x85",
    "\ufeff",
    "\u200d",
    "|",
    "\\|",
    "\\",
    "&amp;",
    "&#x3c;",
    "<!--",
    "> quote",
    "- item",
    "1. item",
    "---",
    "    indented",
    "*",
    "__",
    "~~",
    "{{ .Labels }}",
    "'",
    '"',
]
HOSTILE = st.builds(
    lambda parts, n: "".join(parts) * n,
    st.lists(
        st.one_of(st.sampled_from(FRAGMENTS), st.text(min_size=1, max_size=5)),
        min_size=1,
        max_size=6,
    ),
    st.sampled_from([1, 1, 1, 2, 300]),  # sometimes very long
)
# Every id and name a producer (or an operator's policy) puts in a report.
WAIT_FIELDS = ("requestId", "threadId", "runId", "interruptId", "action", "reason", "policy")
EVIDENCE_FIELDS = ("approverRef", "actionDigest", "route")
FIELDS = (*WAIT_FIELDS, *EVIDENCE_FIELDS, "finding", "rule", "rejectReason")
NOT_IN_MD = {"threadId", "runId", "interruptId"}  # the requestId names a wait there
NOT_IN_HTML = {"threadId", "interruptId", "reason"}  # a reason shows when no action does


def _hostile_report(v: dict[str, str]) -> dict[str, Any]:
    r = copy.deepcopy(SEED)
    for w in r["problemWaits"] + r["changedWaits"]:
        w.update({k: v[k] for k in WAIT_FIELDS})
        w["evidence"].update({k: v[k] for k in EVIDENCE_FIELDS})
        w["findings"] = [v["finding"]]
    for w in r["longestWaits"]:
        w.update(requestId=v["requestId"], action=v["action"], policy=v["policy"])
    for t in r["transitions"]:
        t["requestId"] = v["requestId"]
    for per_policy in r["latency"].values():  # the seed's one policy, renamed the hostile way
        if "default" in per_policy:
            per_policy[v["policy"]] = per_policy.pop("default")
    r["findings"] = {v["rule"]: 2}
    r["previous"]["findings"] = {v["rule"]: 1}
    r["change"]["findings"] = {v["rule"]: 1}
    r["ingest"]["rejectedByReason"] = {v["rejectReason"]: 3}
    r["previous"]["ingest"]["rejectedByReason"] = {}
    return r


BENIGN = _hostile_report(dict.fromkeys(FIELDS, "x"))


def _unsafe(text: str, allowed: str = "\n") -> list[str]:
    return [hex(ord(c)) for c in text if c not in allowed and unicodedata.category(c) in UNSAFE]


def _walk(tokens: list[Token]) -> list[Token]:
    out = []
    for t in tokens:
        out.append(t)
        out += _walk(t.children or [])
    return out


def _shape(tokens: list[Token]) -> list[str]:
    """The block structure: headings, lists, tables, their rows and cells."""
    return [f"{t.type}:{t.tag}" for t in tokens if t.type != "inline"]


def _shown_md(value: str) -> str:
    return safe(value, 200).replace("@", AT)


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.fixed_dictionaries(dict.fromkeys(FIELDS, HOSTILE)))
def test_markdown_keeps_its_structure_and_shows_each_value_as_inert_text(
    v: dict[str, str],
) -> None:
    md = render(_hostile_report(v), "md").decode()
    tokens = MD.parse(md)
    flat = _walk(tokens)

    assert _shape(MD.parse(render(BENIGN, "md").decode())) == _shape(tokens)
    assert {"text", "code_inline", "strong_open", "strong_close"} >= {
        c.type for t in tokens for c in t.children or []
    }
    assert [] == _unsafe(md)
    assert "@" not in md
    codes = {t.content for t in flat if t.type == "code_inline"}
    text = "".join(t.content for t in flat if t.type == "text")
    for field, value in v.items():
        shown = _shown_md(value)
        assert field in NOT_IN_MD or shown in codes or shown in text or not shown.strip(), field


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, tuple[str, ...]]] = []
        self.attrs: list[tuple[str, str]] = []
        self.data: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, tuple(name for name, _ in attrs)))
        self.attrs += [(name, value or "") for name, value in attrs]

    def handle_data(self, data: str) -> None:
        self.data.append(data)


def _html(report: dict[str, Any]) -> _Tags:
    parser = _Tags()
    parser.feed(render(report, "html").decode())
    parser.close()
    return parser


@SETTINGS
@given(st.fixed_dictionaries(dict.fromkeys(FIELDS, HOSTILE)))
def test_html_has_only_its_own_elements_and_shows_each_value_as_text(v: dict[str, str]) -> None:
    page = _html(_hostile_report(v))

    assert _html(BENIGN).tags == page.tags
    assert not any("javascript:" in value.lower() for _, value in page.attrs)
    assert {"data:,"} == {value for name, value in page.attrs if name in {"href", "src"}}
    text = "\x01".join(page.data)
    assert [] == _unsafe(text, allowed="\n\x01")
    for field, value in v.items():
        assert field in NOT_IN_HTML or safe(value, 1000) in text or not safe(value, 1000).strip(), (
            field
        )


@SETTINGS
@given(st.fixed_dictionaries(dict.fromkeys(FIELDS, HOSTILE)))
def test_json_carries_every_value_exactly(v: dict[str, str]) -> None:
    report = _hostile_report(v)

    assert report == orjson.loads(render(report, "json"))


class _Captured(AlertmanagerPush):
    def __init__(self) -> None:
        super().__init__("http://127.0.0.1:1", 60_000)
        self.bodies: list[bytes] = []

    def _send(self, alerts: list[dict[str, Any]]) -> bool:
        self.bodies.append(json.dumps(alerts).encode())
        return True


@SETTINGS
@given(HOSTILE, HOSTILE, HOSTILE, HOSTILE)
def test_alertmanager_labels_are_clean_capped_unique_and_the_summary_is_inert(
    request_id: str, other_id: str, policy: str, approver: str
) -> None:
    evidence = json.dumps({"approverRef": approver, "actionDigest": request_id, "route": policy})
    waits = [
        ProblemWait(
            rid, "STALE", "requester", policy, 1_785_000_000_000, "Cancel it.", evidence, "{}"
        )
        for rid in dict.fromkeys((request_id, other_id))
    ]
    push = _Captured()

    push.push(waits, 1_785_083_400_000)
    alerts = json.loads(push.bodies[0])

    assert len(waits) == len({a["labels"]["requestId"] for a in alerts})
    for alert, wait in zip(alerts, waits, strict=True):
        for value in alert["labels"].values():
            assert len(value) <= 128
            assert [] == _unsafe(value, allowed="")
        summary = alert["annotations"]["summary"]
        tokens = MD.parse(summary)
        assert ["paragraph_open", "inline", "paragraph_close"] == [t.type for t in tokens]
        assert {"text"} == {t.type for t in tokens[1].children or []}
        shown = label(wait.request_id).strip().replace("@", AT) or NO_ID
        assert f"{shown} is STALE" == tokens[1].children[0].content  # type: ignore[index]
        assert "@" not in summary and "<" not in summary
        for text in json.loads(alert["annotations"]["evidence"]).values():
            assert len(text) <= 200
            assert [] == _unsafe(text, allowed="")


@SETTINGS
@given(HOSTILE)
def test_a_log_record_is_one_capped_line_without_control_characters(value: str) -> None:
    try:
        raise ValueError(f"no verdict for {value}")
    except ValueError as e:
        record = logging.LogRecord(
            "sidewatch.auditor",
            logging.ERROR,
            __file__,
            1,
            "wait %s could not be classified; skipped",
            (value,),
            (type(e), e, e.__traceback__),
        )

    line = JsonLogs().format(record)
    entry = json.loads(line)

    assert [line] == line.splitlines()  # splitlines splits at U+2028, U+0085, \x1c... too
    assert len(entry["msg"]) <= LOG_MESSAGE_LIMIT
    assert [] == _unsafe(entry["msg"], allowed="")
    assert [] == _unsafe(entry["exc"])
    assert entry["msg"].startswith("wait ")


def _audited(request_id: str, action: str) -> tuple[str, dict[str, Any]]:
    at = 1_785_083_400_000
    ev = WaitEvidence(request_id, request_id, action, action, at - 60_000, action=action)
    v = classify(ev, DEFAULT_POLICY, at)
    return audit_table(at, [(ev, v)]), verdict_json(ev, v)


@SETTINGS
@given(HOSTILE, HOSTILE)
def test_the_audit_table_and_the_verdict_json_survive_any_id(request_id: str, action: str) -> None:
    table, verdict = _audited(request_id, action)

    assert len(_audited("x", "x")[0].splitlines()) == len(table.splitlines())
    assert [] == _unsafe(table)  # no escape sequence reaches a terminal
    assert max(map(len, table.splitlines())) < 400
    assert (request_id, action) == (verdict["requestId"], verdict["action"])
    assert verdict == orjson.loads(orjson.dumps(verdict))
