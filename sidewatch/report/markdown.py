"""The audit report as Markdown, for chat and tickets. Every value from the evidence is shown
as a plain word or else as a code span (see `core.text.md_code`): nothing a producer sent can
become a heading, link, image, HTML, mention or a cell of another row. With the daemon's
external URL, each wait's id links to its page there: the link is ours, the id stays code."""

from __future__ import annotations

import re
from typing import Any

from sidewatch.core.text import md_code, wait_page_url

LISTED = 500  # waits of the window's audit trail shown (every problem wait is)
VALUE_LIMIT = 200  # characters of one value shown (`md_code` cuts longer ones)
# Shown as they are: words (states, owners, rule names, many actions), signed counts and our
# own ISO times. None of these can be markup: no link (no `.`, `/` or `@`), no emphasis (`_`
# only inside a word), and no value starts a line.
_PLAIN = re.compile(
    r"[A-Za-z0-9]+(_[A-Za-z0-9]+)*|[+-][0-9]+|[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}(\.[0-9]+)?Z"
)


class _Md(str):
    """Markdown made safe already: `_v` shows it as it is."""

    __slots__ = ()


def _v(value: Any) -> str:
    """A value of the report: a dash for none, numbers and plain words as they are, anything
    else as a code span."""
    if isinstance(value, _Md):
        return value
    if value is None or value == "":
        return "-"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    text = str(value)
    return (
        text if len(text) <= VALUE_LIMIT and _PLAIN.fullmatch(text) else md_code(text, VALUE_LIMIT)
    )


def _table(head: list[str], rows: list[list[Any]]) -> list[str]:
    """`rows` hold values (shown by `_v`); a `|` in one is escaped, even in a code span (GFM
    splits a row into cells before it reads the spans)."""
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(_v(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return out


def _request(request_id: str, base: str | None) -> str:
    """A wait's id as a code span, linked to its page on the daemon when `base` (its external
    URL) is known. The URL is `wait_page_url`'s, as the HTML report's: the id percent-encoded,
    so that nothing of it (`)`, `<`, a space) can end or change the link."""
    code = md_code(request_id)
    if not base:
        return _Md(code)
    return _Md(f"[{code}](<{wait_page_url(base, request_id)}>)")


def _signed(n: int) -> str:
    return f"+{n}" if n > 0 else str(n)


def _wait(p: dict[str, Any], base: str | None = None) -> list[str]:
    """One verdict: state, owner, next safe move, evidence and thresholds."""
    e, t = p["evidence"], p["thresholds"]
    missing = ", ".join(map(_v, p["missing"]))
    unreported = ", ".join(map(_v, p.get("unreported", ())))
    lines = [
        f"### {_v(p['state'])}: {_request(p['requestId'], base)}"
        + (f" (uncertain: never reported: {unreported})" if unreported else ""),
        "",
        f"- **Owner:** {_v(p['owner'])}  **Since:** {_v(p['since'])}  **Policy:** "
        f"{_v(p['policy'])}" + (f"  **Uncertain** (missing: {missing})" if p["uncertain"] else ""),
        f"- **Next safe move:** {p['nextMove']}",
        f"- **Action:** {_v(p['action'])} ({_v(p['reason'])}), digest "
        f"{md_code(e['actionDigest']) if e['actionDigest'] else '-'}"
        f"{' (changed)' if e['digestChanged'] else ''}",
        f"- **Evidence:** requested {_v(e['requestedAt'])}, expires {_v(e['expiresAt'])}; "
        f"route {_v(e['route'])} to {_v(e['approverRef'])}; resume handle "
        f"{'held' if e['resumeHandle'] else 'none'}, last heartbeat "
        f"{_v(e['lastHeartbeatAt'])}; decision {_v(e['decision'])}"
        f"{' (of the edited action)' if e.get('actionEdited') else ''} at "
        f"{_v(e['decidedAt'])}; receipt {_v(e['receiptAt'])}"
        + (
            f"; the continuation failed ({_v(e['continuationFailure'])})"
            if e["continuationFailed"] and e.get("continuationFailure")
            else "; the continuation failed"
            if e["continuationFailed"]
            else ""
        )
        + _subagent(e.get("subagent")),
        f"- **Thresholds:** resume grace {t['resumeGraceSeconds']} s, heartbeat freshness "
        f"{t['heartbeatFreshnessSeconds']} s, route grace {t['routeGraceSeconds']} s",
    ]
    if p.get("findings"):
        lines.append(f"- **Findings:** {', '.join(map(_v, p['findings']))}")
    return [*lines, ""]


def _subagent(s: dict[str, Any] | None) -> str:
    """The subagent that raised the wait (evidence only), as the end of the evidence line."""
    if not s:
        return ""
    name = f" ({_v(s['name'])})" if s.get("name") else ""
    state = _v(s["state"]) if s.get("state") else "no SUBAGENT_* event seen"
    since = f" since {_v(s['since'])}" if s.get("since") else ""
    return f"; raised by subagent {_v(s['runId'])}{name}, {state}{since}"


def render_markdown(report: dict[str, Any], external_url: str | None = None) -> str:
    """The report as Markdown; with `external_url` (server.externalUrl), each wait's id links
    to its page on the daemon, as in the HTML report."""
    w = report["window"]
    lines = [f"# sidewatch audit report: {_v(w['start'])} to {_v(w['end'])}", ""]
    kept = report.get("retention", {})
    if kept.get("windowPruned"):
        pruned = ", ".join(f"{n} {_v(k)}" for k, n in kept["pruned"].items()) or "nothing counted"
        lines += [
            f"> This window, or the previous one, reaches back before {_v(kept['prunedBefore'])}: "
            f"what is older was pruned (store.retention; pruned so far: {pruned}). The figures "
            "below are of what is kept.",
            "",
        ]

    counts, change = report["countsAtEnd"], report["change"]["counts"]
    lines += ["## Waits at the end of the window", ""]
    lines += _table(
        ["state", "waits", "change"], [[s, n, _signed(change.get(s, 0))] for s, n in counts.items()]
    )

    problems = report["problemWaits"]
    lines += ["", f"## Problem waits ({len(problems)})", ""]
    if not problems:
        lines.append("None: every open wait is healthy.")
    unreported = sum(1 for p in problems if p.get("unreported"))
    if unreported:
        lines += [
            f"{unreported} of them rest on evidence nobody reports (uncertain: never "
            "reported): a fix of the deployment's reporting, for whoever runs sidewatch, "
            "not a page to their owners.",
            "",
        ]
    for p in problems:
        lines += _wait(p, external_url)
    changed = report.get("changedWaits", [])
    lines += [f"## Other waits that moved in the window ({len(changed)})", ""]
    for p in changed[:LISTED]:
        lines += _wait(p, external_url)
    if len(changed) > LISTED:
        lines += [f"...and {len(changed) - LISTED} more, in the JSON report.", ""]

    lines += ["## Transitions in the window", ""]
    pairs = report["transitionCounts"]
    arrows = [[_Md(" → ".join(map(_v, k.split("->", 1)))), n] for k, n in pairs.items()]
    lines += _table(["from → to", "count"], arrows)
    lines += [""]

    lines += ["## Latency", ""]
    rows = []
    for kind, per_policy in report["latency"].items():
        for policy, q in per_policy.items():
            rows.append(
                [
                    kind.replace("Seconds", ""),
                    policy,
                    q["count"],
                    q["p50"],
                    q["p90"],
                    q["p99"],
                    q["max"],
                ]
            )
    lines += _table(["latency (s)", "policy", "count", "p50", "p90", "p99", "max"], rows)
    if not rows:
        lines.append("| (none in the window) | | | | | | |")

    lines += ["", "## Longest open waits", ""]
    lines += _table(
        ["request", "state", "owner", "requested", "age (s)", "action"],
        [
            [
                _request(x["requestId"], external_url),
                x["state"],
                x["owner"],
                x["requestedAt"],
                x["ageSeconds"],
                x["action"],
            ]
            for x in report["longestWaits"]
        ],
    )

    lines += ["", "## Protocol findings", ""]
    findings = report["findings"]
    lines += (
        _table(
            ["rule", "count", "change"],
            [[r, n, _signed(report["change"]["findings"].get(r, 0))] for r, n in findings.items()],
        )
        if findings
        else ["None."]
    )

    return "\n".join(lines + _ingest_health(report, kept)) + "\n"


def _ingest_health(report: dict[str, Any], kept: dict[str, Any]) -> list[str]:
    """The report's last section: what was received in the window, and the evidence kept for
    waits never seen."""
    ing = report["ingest"]
    lines = [
        "",
        "## Ingest health",
        "",
        f"{ing['units']} unit(s) received in the window: {ing['acceptedLines']} lines accepted, "
        f"{ing['skippedLines']} skipped, {ing['rejectedLines']} rejected "
        f"({_signed(report['change']['rejectedLines'])} on the previous window).",
    ]
    if not ing["units"]:  # the waits above are by their evidence's times, units by receipt
        lines[-1] += (
            " Units count in the window they were received in, not the one their events are "
            "dated in: traffic dated here but ingested later counts in its ingest's window."
        )
    if ing.get("redeliveredUnits"):
        lines[-1] = lines[-1].removesuffix(".") + (
            f"; {ing['redeliveredUnits']} of the units delivered again: "
            f"{ing['redeliveredLines']} lines already stored, not counted above."
        )
    if ing["rejectedByReason"]:
        reasons = [[reason, n] for reason, n in ing["rejectedByReason"].items()]
        lines += ["", *_table(["reason", "lines"], reasons)]
    unknown = kept.get("unknownWaitEvidence", {})
    tables = sorted({*unknown.get("kept", {}), *unknown.get("pruned", {})})
    if tables:
        lines += [
            "",
            "Evidence for unknown waits (naming no wait seen: a notifier or tap naming the "
            "wrong thread or requestId shows up here):",
            "",
            *_table(
                ["evidence", "kept", "pruned"],
                [[t, unknown["kept"].get(t, 0), unknown["pruned"].get(t, 0)] for t in tables],
            ),
        ]
    return lines
