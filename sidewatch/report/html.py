"""The audit report as one self-contained HTML page for the morning reader: tables, and charts
drawn here as inline SVG. Pure: a function of the report dict; every string is escaped."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from datetime import UTC, datetime
from html import escape
from itertools import pairwise
from typing import Any

from sidewatch.core.model import CLOSED_STATES, OPEN_STATES, PROBLEM_STATES
from sidewatch.core.text import safe, wait_page_url

PROBLEMS = frozenset(s.value for s in PROBLEM_STATES)
TEXT_LIMIT = 1000  # characters of one value shown
PERCENTILES = ("p50", "p90", "p99", "max")
TICK_MINUTES = (1, 2, 5, 10, 15, 30, 60, 120, 180, 240, 360, 720, 1440)
# The state colours are Okabe-Ito's: told apart with the common colour-vision deficiencies.
CSS = """
.st-WAITING{--c:#56b4e9}.st-STALE{--c:#e69f00}.st-UNROUTABLE{--c:#cc79a7}.st-ORPHANED{--c:#d55e00}
.st-STUCK_AFTER_DECISION{--c:#0072b2}.st-CLOSED_BY_DECLINE{--c:#999}.st-RESUMED{--c:#009e73}
.st-CANCELLED{--c:#666}
body{font:15px/1.45 system-ui,sans-serif;color:#1f2328;background:#f6f8fa;margin:0}
main{max-width:1120px;margin:0 auto;padding:24px 28px 48px}
header{border-bottom:3px solid #1f2328}h1{font-size:26px;margin:0 0 4px}
h2{font-size:19px;margin:4px 0 10px}h3{font-size:16px;margin:0}h3 code{font-size:15px}
h4{margin:10px 0 4px;font-size:14px;color:#57606a}.sub,.none,figcaption,th,dt{color:#57606a}
section,article{background:#fff;border:1px solid #d0d7de;border-radius:8px;padding:12px 18px}
section{margin-top:16px}article{border-left:6px solid var(--c);margin:12px 0}
.tiles{display:grid;grid-template-columns:repeat(5,1fr);gap:10px;list-style:none;padding:0}
.tiles li{border:1px solid #d0d7de;border-radius:6px;padding:8px 12px}
.tiles li.problem{border-left:5px solid var(--c)}
.tiles .n{display:block;font-size:28px;font-weight:600}
.tiles .d{color:#57606a;font-size:13px}.none{font-style:italic}article td{padding:2px 8px}
table{border-collapse:collapse;width:100%;margin:6px 0 10px;font-size:14px}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #eaeef2;vertical-align:top}
.num{text-align:right;font-variant-numeric:tabular-nums}tbody tr:nth-child(even){background:#f6f8fa}
code{font:13px ui-monospace,Menlo,Consolas,monospace;word-break:break-all}
.badge{white-space:nowrap;font-weight:600;font-size:13px}
.badge.unreported{color:#6e7781;font-style:italic}
.badge::before,.sw{content:"";display:inline-block;width:.75em;height:.75em;border-radius:50%;
 background:var(--c);margin-right:.35em}
.move{background:#fff8c5;border-radius:4px;padding:6px 10px;margin:8px 0}
dl{display:flex;flex-wrap:wrap;gap:4px 24px;margin:6px 0}dl>div{display:flex;gap:6px}dd{margin:0}
.two{display:grid;grid-template-columns:2fr 1fr;gap:18px;align-items:start}
figure{margin:8px 0}svg{width:100%;height:auto;font-size:12px}svg text{fill:#57606a}
svg rect{fill:var(--c)}svg .grid{stroke:#eaeef2}svg .val{fill:#1f2328}
figcaption{font-size:13px}figcaption span{margin-right:14px}
.q-p50{fill:#9ecae1}.q-p90{fill:#4292c6}.q-p99{fill:#2171b5}.q-max{fill:#08306b}
"""


# Lists of the window's audit trail stop here in the page (every problem wait is shown).
LISTED = 500


def render_html(report: dict[str, Any], external_url: str | None = None) -> str:
    """The report dict of `build_report` as a single HTML page that opens offline; with
    `external_url` (server.externalUrl), each wait's id links to its page on the daemon."""
    w = report["window"]
    title = f"sidewatch audit report, {w['start']} to {w['end']}"
    sections = [
        ("counts", "Waits at the window's end", _counts(report)),
        ("open", "Open waits by state over the window", _open_chart(report)),
        ("problems", "Problem waits", _problems(report["problemWaits"], external_url)),
        ("changed", "Other waits that moved in the window", _changed(report, external_url)),
        ("transitions", "Transitions in the window", _transitions(report, external_url)),
        ("latency", "Decision and resume latency", _latency(report["latency"])),
        ("longest", "Longest open waits", _longest(report["longestWaits"], external_url)),
        ("findings", "Protocol findings", _findings(report)),
        ("ingest", "Ingest health", _ingest(report)),
    ]
    body = "".join(
        f'<section aria-labelledby="{k}"><h2 id="{k}">{h}</h2>{b}</section>' for k, h, b in sections
    )
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        # Nothing may load or run, so a producer's string that slipped through stays inert.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">"
        f'<link rel="icon" href="data:,"><title>{_e(title)}</title><style>{CSS}</style>'
        "</head><body><main><header><h1>sidewatch audit report</h1><p class=sub>Window "
        f"{_time(w['start'])} to {_time(w['end'])} ({_dur(w['seconds'])}), compared with the "
        f"window before it. Schema version {_e(report['schemaVersion'])}.</p></header>{body}"
        "</main></body></html>\n"
    )


def _e(value: Any) -> str:
    """A value as escaped text: none as a dash, booleans as yes/no, 600.0 as 600; without
    control or format characters (a bidi override would reorder what the reader sees) and
    capped."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return escape(safe(value, TEXT_LIMIT))


def _ms(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp() * 1000)


def _time(text: str | None) -> str:
    shown = _e(text).replace("T", " ").replace("Z", " UTC")
    return f'<time datetime="{_e(text)}">{shown}</time>' if text else "—"


def _dur(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.3g} s"
    h, rest = divmod(round(seconds), 3600)
    parts = (f"{h} h" if h else "", f"{rest // 60} min" if rest // 60 else "", f"{rest % 60} s")
    return " ".join(p for p in parts if p and p != "0 s")


def _badge(state: str | None) -> str:
    return f'<span class="badge st-{_e(state)}">{_e(state)}</span>' if state else "—"


def _delta(n: int) -> str:
    return f"+{n}" if n > 0 else str(n) if n else "±0"


def _code(value: Any) -> str:
    return f"<code>{_e(value)}</code>"


def _table(head: Sequence[str], rows: Iterable[Sequence[str]], num: Collection[int] = ()) -> str:
    """`rows` hold markup already escaped; the `num` columns are right-aligned numbers."""
    cls = [' class="num"' if i in num else "" for i in range(len(head))]
    th = "".join(f'<th scope="col"{c}>{h}</th>' for h, c in zip(head, cls, strict=True))
    trs = ("".join(f"<td{c}>{v}</td>" for v, c in zip(r, cls, strict=True)) for r in rows)
    body = "</tr><tr>".join(trs)
    return f"<table><thead><tr>{th}</tr></thead><tbody><tr>{body}</tr></tbody></table>"


def _counts(r: dict[str, Any]) -> str:
    counts, change = r["countsAtEnd"], r["change"]["counts"]
    n_open = sum(counts.get(s.value, 0) for s in OPEN_STATES)
    n_bad = sum(counts.get(s, 0) for s in PROBLEMS)
    out = [f"<p>{n_open} open, {n_bad} of them in a problem state.</p>"]
    for name, states in (("Open", OPEN_STATES), ("Closed", CLOSED_STATES)):
        out.append(f"<h4>{name}</h4><ul class=tiles>")
        for s in (x.value for x in states):
            n, d = counts.get(s, 0), _delta(change.get(s, 0))
            out.append(
                f'<li class="st-{s}{" problem" if s in PROBLEMS else ""}">{_badge(s)}'
                f'<span class="n">{n}</span><span class="d">{d} vs. previous window</span></li>'
            )
        out.append("</ul>")
    return "".join(out)


def open_series(r: dict[str, Any]) -> list[tuple[int, dict[str, int]]]:
    """Open waits per state as steps (epoch ms, counts), from the previous window's counts;
    each transition moves one wait from its `from` state to its `to` state."""
    start, end = _ms(r["window"]["start"]), _ms(r["window"]["end"])
    counts: dict[str, int] = {s.value: r["previous"]["counts"].get(s.value, 0) for s in OPEN_STATES}
    steps = [(start, dict(counts))]
    for t in r["transitions"]:
        counts.update({k: counts[k] + d for k, d in ((t["from"], -1), (t["to"], 1)) if k in counts})
        if steps[-1][0] == (at := _ms(t["at"])):
            steps.pop()
        steps.append((at, dict(counts)))
    return [*steps, (end, counts)]


def _open_chart(r: dict[str, Any]) -> str:
    start, end = _ms(r["window"]["start"]), _ms(r["window"]["end"])
    steps = open_series(r)
    # When everything happened late in the window, zoom in: a long flat start says nothing.
    first = steps[1][0] if len(steps) > 2 else start
    x0 = start if first - start < (end - start) // 2 else first - (end - first) // 8
    days = -(-(end - x0) // 6 // 86_400_000) * 86_400_000  # beyond the list: whole days
    tick = next((m * 60_000 for m in TICK_MINUTES if end - x0 <= 6 * m * 60_000), days)
    x0 = max(start, min(x0 - x0 % tick, end - tick))
    top = max(1, *(sum(c.values()) for _, c in steps))
    width, height, left, right, bottom = 1000, 240, 40, 24, 26

    def x(ms: int) -> float:
        return left + (max(ms, x0) - x0) * (width - left - right) / max(1, end - x0)

    def y(n: float) -> float:
        return 8 + (height - bottom - 8) * (1 - n / top)

    out: list[str] = []
    for n in range(0, top + 1, max(1, -(-top // 5))):
        out.append(f'<line class=grid x1="{left}" x2="{width - right}" y1="{y(n)}" y2="{y(n)}"/>')
        out.append(f'<text x="{left - 8}" y="{y(n) + 4}" text-anchor="end">{n}</text>')
    fmt = (
        "%m-%d" if tick % 86_400_000 == 0 else "%H:%M" if end - x0 <= 86_400_000 else "%m-%d %H:%M"
    )
    for ms in range(-(-x0 // tick) * tick, end + 1, tick):
        label = datetime.fromtimestamp(ms / 1000, UTC).strftime(fmt)
        out.append(f'<text x="{x(ms)}" y="{height - 6}" text-anchor="middle">{label}</text>')
    for (t, c), (t_next, _) in pairwise(steps):
        base = 0
        for s in (s.value for s in OPEN_STATES):
            if c[s] > 0 and x(t_next) > x(t):
                out.append(
                    f'<rect class="st-{s}" x="{x(t):.1f}" y="{y(base + c[s]):.1f}" '
                    f'width="{x(t_next) - x(t):.1f}" height="{y(base) - y(base + c[s]):.1f}"/>'
                )
            base += c[s]
    legend = "".join(
        f'<span class="st-{s.value}"><i class=sw></i>{s.value}</span>' for s in OPEN_STATES
    )
    if x0 > start:
        legend += (
            f"<br>Before {datetime.fromtimestamp(x0 / 1000, UTC):%H:%M} UTC the counts held at the "
            f"previous window's end ({sum(steps[0][1].values())} open)."
        )
    return (
        f'<figure><svg viewBox="0 0 {width} {height}" role="img" aria-labelledby="open-d" '
        'shape-rendering="crispEdges"><desc id="open-d">Open waits stacked by state over the '
        f"window.</desc>{''.join(out)}</svg><figcaption>{legend}</figcaption></figure>"
    )


def _request(request_id: str, base: str | None) -> str:
    """A wait's id, linked to its page on the daemon when its external URL is known."""
    if not base:
        return _code(request_id)
    return f'<a href="{_e(wait_page_url(base, request_id))}">{_code(request_id)}</a>'


def _problems(waits: list[dict[str, Any]], base: str | None = None) -> str:
    return (
        "".join(_problem(w, base) for w in waits)
        or '<p class="none">No wait is in a problem state.</p>'
    )


def _changed(report: dict[str, Any], base: str | None = None) -> str:
    waits = report.get("changedWaits", [])
    shown = waits[:LISTED]
    body = "".join(_problem(w, base) for w in shown) + _more(len(waits) - len(shown), "waits")
    return body or '<p class="none">No other wait moved.</p>'


def _problem(w: dict[str, Any], base: str | None = None) -> str:
    doubt = "missing " + _e(", ".join(w["missing"])) if w["missing"] else _e(w["uncertain"])
    meta = {
        "Owner": _e(w["owner"] or "none"),
        "Since": _time(w["since"]),
        "Action": _code(w["action"] or w["reason"]),
        "Policy": _e(w["policy"]),
        "Run": _code(w["runId"]),
        "Phase": _e(w["phase"]) if w["phase"] else "",
        "Uncertain": "" if doubt == "no" else doubt,
        "Findings": _e(", ".join(w["findings"])),
        "Subagent": _subagent(w["evidence"].get("subagent")),
    }
    dl = "".join(f"<div><dt>{k}</dt><dd>{v}</dd></div>" for k, v in meta.items() if v)
    evidence = _table(
        ("Evidence", "Value"),
        ((_e(k), _cell(k, v)) for k, v in w["evidence"].items() if k != "subagent"),
    )
    limits = _table(
        ("Threshold", "Value"), ((_e(k), _dur(v)) for k, v in w["thresholds"].items()), (1,)
    )
    unreported = ", ".join(w.get("unreported", ()))
    never = (
        f' <span class="badge unreported">uncertain: never reported: {_e(unreported)}</span>'
        if unreported
        else ""
    )
    return (
        f'<article class="st-{_e(w["state"])}"><h3>{_request(w["requestId"], base)} '
        f"{_badge(w['state'])}"
        f'{never}</h3><p class="move"><strong>Next safe move:</strong> {_e(w["nextMove"])}</p>'
        f'<dl>{dl}</dl><div class="two">{evidence}{limits}</div></article>'
    )


def _subagent(s: dict[str, Any] | None) -> str:
    """The subagent that raised the wait: its invocation id, name and state (evidence only)."""
    if not s:
        return ""
    name = f" {_code(s['name'])}" if s.get("name") else ""
    state = _e(s["state"] or "no SUBAGENT_* event seen")
    since = f" since {_time(s['since'])}" if s.get("since") else ""
    return f"{_code(s['runId'])}{name} · {state}{since}"


def _cell(key: str, value: Any) -> str:
    if key.endswith("At"):  # the evidence's times: requestedAt, decidedAt, ...
        return _time(value)
    return _code(value) if isinstance(value, str) else _e(value)


def _transitions(r: dict[str, Any], base: str | None = None) -> str:
    if not r["transitions"]:
        return '<p class="none">No wait changed state in this window.</p>'
    pairs = (k.replace("none->", "new → ").replace("->", " → ") for k in r["transitionCounts"])
    summary = ", ".join(
        f"{_e(k)} &times;{_e(n)}"
        for k, n in zip(pairs, r["transitionCounts"].values(), strict=True)
    )
    shown = r["transitions"][-LISTED:]  # the latest; the JSON report has them all
    rows = (
        (_time(t["at"]), _request(t["requestId"], base), _badge(t["from"]), _badge(t["to"]))
        for t in shown
    )
    table = _table(("At", "Request", "From", "To"), rows)
    return f"<p>{summary}</p>" + table + _more(len(r["transitions"]) - len(shown), "transitions")


def _more(hidden: int, what: str) -> str:
    if hidden <= 0:
        return ""
    return '<p class="none">' + f"{hidden} more {_e(what)} are in the JSON report.</p>"


def _latency(latency: dict[str, dict[str, dict[str, float]]]) -> str:
    kinds = {"decision": latency["decisionSeconds"], "resume": latency["resumeSeconds"]}
    groups = [(f"{k} · {policy}", s, k) for k, by in kinds.items() for policy, s in by.items()]
    if not groups:
        return '<p class="none">No decision or resume in this window.</p>'
    # One scale per kind: resumes take seconds where decisions take minutes.
    tops = {k: max((s["max"] for s in by.values()), default=0) or 1 for k, by in kinds.items()}
    width, label, pitch = 1000, 150, 18
    out: list[str] = []
    for i, (g, s, k) in enumerate(groups):
        y0 = i * (pitch * 4 + 30)
        out.append(f'<text class=val x="0" y="{y0 + 14}" font-weight="600">{_e(g)}</text>')
        for j, p in enumerate(PERCENTILES):
            y, bar = y0 + 22 + j * pitch, (width - label - 110) * s[p] / tops[k]
            out.append(
                f'<text x="{label - 8}" y="{y + 11}" text-anchor="end">{p}</text>'
                f'<rect class="q-{p}" x="{label}" y="{y}" width="{bar:.1f}" height="13"/>'
                f'<text class=val x="{label + bar + 6:.1f}" y="{y + 11}">{_dur(s[p])}</text>'
            )
    rows = ((_e(g), _e(s["count"]), *(_dur(s[p]) for p in PERCENTILES)) for g, s, _ in groups)
    return (
        f'<figure><svg viewBox="0 0 {width} {len(groups) * (pitch * 4 + 30)}" role="img" '
        'aria-labelledby="lat-d"><desc id="lat-d">Latency percentiles per policy, as in the '
        f"table below; decisions and resumes each on their own scale.</desc>{''.join(out)}</svg>"
        "</figure>" + _table(("Latency · policy", "count", *PERCENTILES), rows, range(1, 6))
    )


def _longest(waits: list[dict[str, Any]], base: str | None = None) -> str:
    if not waits:
        return '<p class="none">No wait is open.</p>'
    head = ("Request", "State", "Owner", "Age", "Requested", "Action", "Policy")
    keys = ("requestId", "state", "owner", "ageSeconds", "requestedAt", "action", "policy")
    show: tuple[Callable[[Any], str], ...] = (
        lambda rid: _request(rid, base),
        _badge,
        _e,
        _dur,
        _time,
        _code,
        _e,
    )
    rows = ([f(w[k]) for f, k in zip(show, keys, strict=True)] for w in waits)
    return _table(head, rows, (3,))


def _findings(r: dict[str, Any]) -> str:
    now, rules = r["findings"], sorted({*r["findings"], *r["previous"]["findings"]})
    rows = ((_code(k), _e(now.get(k, 0)), _delta(r["change"]["findings"].get(k, 0))) for k in rules)
    if not rules:
        return '<p class="none">No protocol finding in this window or the one before.</p>'
    return _table(("Rule", "This window", "Change"), rows, (1, 2))


def _ingest(r: dict[str, Any]) -> str:
    now, before = r["ingest"], r["previous"]["ingest"]
    keys = ("units", "acceptedLines", "skippedLines", "rejectedLines", "redeliveredLines")
    names = ("Units received", "Lines accepted", "Lines skipped", "Lines rejected", "Lines again")
    # .get: a report written before re-delivered lines were counted has none
    rows = [
        (n, _e(now.get(k, 0)), _delta(now.get(k, 0) - before.get(k, 0)))
        for k, n in zip(keys, names, strict=True)
    ]
    rows += [(f"&emsp;rejected: {_code(k)}", _e(n), "") for k, n in now["rejectedByReason"].items()]
    return _table(("Ingest", "This window", "Change"), rows, (1, 2))
