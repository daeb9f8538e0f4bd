"""The audit report as Markdown, for chat and tickets."""

from __future__ import annotations

from typing import Any

LISTED = 500  # waits of the window's audit trail shown (every problem wait is)


def _cell(value: Any) -> str:
    text = "-" if value is None or value == "" else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def _table(head: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return out


def _signed(n: int) -> str:
    return f"+{n}" if n > 0 else str(n)


def _wait(p: dict[str, Any]) -> list[str]:
    """One verdict: state, owner, next safe move, evidence and thresholds."""
    e, t = p["evidence"], p["thresholds"]
    lines = [
        f"### {p['state']}: `{p['requestId']}`",
        "",
        f"- **Owner:** {_cell(p['owner'])}  **Since:** {p['since']}  **Policy:** {p['policy']}"
        + ("  **Uncertain** (missing: " + ", ".join(p["missing"]) + ")" if p["uncertain"] else ""),
        f"- **Next safe move:** {p['nextMove']}",
        f"- **Action:** {_cell(p['action'])} ({_cell(p['reason'])}), digest "
        f"`{_cell(e['actionDigest'])}`{' (changed)' if e['digestChanged'] else ''}",
        f"- **Evidence:** requested {e['requestedAt']}, expires {_cell(e['expiresAt'])}; "
        f"route {e['route']} to {_cell(e['approverRef'])}; resume handle "
        f"{'held' if e['resumeHandle'] else 'none'}, last heartbeat {e['lastHeartbeatAt']}; "
        f"decision {_cell(e['decision'])} at {_cell(e['decidedAt'])}; receipt "
        f"{_cell(e['receiptAt'])}"
        + ("; the continuation failed" if e["continuationFailed"] else ""),
        f"- **Thresholds:** resume grace {t['resumeGraceSeconds']} s, heartbeat freshness "
        f"{t['heartbeatFreshnessSeconds']} s, route grace {t['routeGraceSeconds']} s",
    ]
    if p.get("findings"):
        lines.append(f"- **Findings:** {', '.join(p['findings'])}")
    return [*lines, ""]


def render_markdown(report: dict[str, Any]) -> str:
    w = report["window"]
    lines = [f"# sidewatch audit report: {w['start']} to {w['end']}", ""]

    counts, change = report["countsAtEnd"], report["change"]["counts"]
    lines += ["## Waits at the end of the window", ""]
    lines += _table(
        ["state", "waits", "change"], [[s, n, _signed(change.get(s, 0))] for s, n in counts.items()]
    )

    problems = report["problemWaits"]
    lines += ["", f"## Problem waits ({len(problems)})", ""]
    if not problems:
        lines.append("None: every open wait is healthy.")
    for p in problems:
        lines += _wait(p)
    changed = report.get("changedWaits", [])
    lines += [f"## Other waits that moved in the window ({len(changed)})", ""]
    for p in changed[:LISTED]:
        lines += _wait(p)
    if len(changed) > LISTED:
        lines += [f"...and {len(changed) - LISTED} more, in the JSON report.", ""]

    lines += ["## Transitions in the window", ""]
    pairs = report["transitionCounts"]
    lines += _table(["from → to", "count"], [[k.replace("->", " → "), n] for k, n in pairs.items()])
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
                f"`{x['requestId']}`",
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

    ing = report["ingest"]
    lines += [
        "",
        "## Ingest health",
        "",
        f"{ing['units']} unit(s): {ing['acceptedLines']} lines accepted, {ing['skippedLines']} "
        f"skipped, {ing['rejectedLines']} rejected "
        f"({_signed(report['change']['rejectedLines'])} on the previous window).",
    ]
    if ing["rejectedByReason"]:
        reasons = [[reason, n] for reason, n in ing["rejectedByReason"].items()]
        lines += ["", *_table(["reason", "lines"], reasons)]
    return "\n".join(lines) + "\n"
