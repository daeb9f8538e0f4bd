"""The wait pages for the person on call: `/ui`, `/ui/waits` and `/ui/waits/{requestId}`,
rendered on the server from the read API's answers (no script), and the runbooks. The read
token protects them: as a bearer header, or as a cookie set by the login form."""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import shlex
import shutil
import sys
import time
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlencode

import orjson
from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup, escape
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from sidewatch.app.read import BadCursor, Filters, Read
from sidewatch.config import Token
from sidewatch.core.model import (
    CLOSED_STATES,
    OPEN_STATES,
    OWNER,
    SEVERITY,
    Owner,
    Severity,
    State,
)
from sidewatch.core.text import safe, wait_page_url
from sidewatch.errors import StoreError, StoreRefused
from sidewatch.exporters.alertmanager import UNREPORTED_RUNBOOK, runbook_path
from sidewatch.report.html import CSS as REPORT_CSS
from sidewatch.report.html import _dur, _ms  # the report's own time formats
from sidewatch.report.verdicts import iso
from sidewatch.store.services import Bound

TEXT_LIMIT = 1000  # characters of one value shown, as in the HTML report
LISTED = 100  # waits a page of the list shows
COOKIE = "sidewatch_ui"
# Nothing may load or run (the HTML report's policy), and forms post only here.
CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}
# Most urgent first: the states that page, then the ticket, then the long waits, then closed.
ORDER = (
    State.STUCK_AFTER_DECISION,
    State.ORPHANED,
    State.UNROUTABLE,
    State.STALE,
    State.WAITING,
    *CLOSED_STATES,
)
RANK = {s.value: i for i, s in enumerate(ORDER)}
PIECES = ("route", "handle", "heartbeat", "decision")
RUNBOOKS = Path(__file__).with_name("runbooks")  # package data: an installed copy has them


def _finalize(value: Any) -> Any:
    """Every `{{ value }}`: none as a dash, booleans as yes/no, producers' strings without
    control or format characters and capped (then autoescaped)."""
    if value is None:
        return "—"
    if isinstance(value, Markup):  # built and escaped here already
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return safe(value, TEXT_LIMIT)
    return value


ENV = Environment(
    loader=PackageLoader("sidewatch.daemon", "templates"),
    autoescape=True,
    finalize=_finalize,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


ENV.filters["wait_href"] = lambda rid: wait_page_url("", rid)


def _when(text: Any) -> Any:
    """An ISO time as a person reads it: `2026-07-26 16:30:00 UTC` (to the second)."""
    if isinstance(text, str) and text[10:11] == "T" and text.endswith("Z"):
        return f"{text[:10]} {text[11:19]} UTC"
    return text


ENV.filters["when"] = _when
ENV.globals["css"] = Markup(REPORT_CSS)  # noqa: S704 (our own style sheet, not a value)
ENV.globals["ui_css"] = Markup("""
nav{margin-bottom:8px;font-size:14px}a{color:#0969da}.big{font-size:22px;margin:6px 0}
.verdict{border-left:8px solid var(--c)}.verdict .badge{font-size:24px}
.tiles{grid-template-columns:repeat(4,1fr)}.tiles a{text-decoration:none}
.filters{display:flex;flex-wrap:wrap;gap:10px;align-items:center}
.ev-present strong{color:#1a7f37}.ev-failing strong{color:#cf222e}
.ev-never-reported strong{color:#6e7781;font-style:italic}
pre{background:#f6f8fa;border:1px solid #d0d7de;border-radius:6px;padding:8px;white-space:pre-wrap;
 word-break:break-all;font:13px ui-monospace,Menlo,Consolas,monospace}
main.wide{max-width:1400px}.scroll{overflow-x:auto}
table.waits code{word-break:normal;overflow-wrap:normal}
table.waits .seg,table.waits td.action code{white-space:nowrap}
table.waits time .seg{display:block}
""")
# The list's ids and action names never break inside a word. The report's `break-all` (for
# values in its narrow cells) is undone for them: an id is laid out as its parts between "/"
# and "@", each kept whole (a hyphen inside one is no break either), with a <wbr> after the
# "/" and before the "@run"; an action name is kept whole. Its nine columns get the width of a
# 1280 px screen (wider than the report's reading width) and its times take two lines, so the
# reference ids fit on one; a name longer than all that scrolls the table inside its box,
# never the page.


def _breakable(request_id: str) -> Markup:
    """A request id, escaped, as its parts between "/" and "@", each kept whole, with a line
    break allowed after each "/" and before each "@" only (the text copied is the id)."""
    out = []
    for part in re.split(r"([/@])", request_id):
        if part == "/":
            out.append("/<wbr>")
        elif part == "@":
            out.append("<wbr>@")
        elif part:
            out.append(f"<span class=seg>{escape(part)}</span>")
    return Markup("".join(out))  # noqa: S704 (each part escaped)


ENV.filters["breakable"] = _breakable


def _when_parts(text: Any) -> Any:
    """`_when`'s time as its date and its clock, each kept whole (the list shows them one
    above the other, so its columns leave the ids their width)."""
    when = _when(text)
    if when is text:
        return text
    date, _, clock = when.partition(" ")
    return Markup(f"<span class=seg>{escape(date)}</span> <span class=seg>{escape(clock)}</span>")  # noqa: S704


ENV.filters["when_parts"] = _when_parts


def session_value(token: Token) -> str:
    """The cookie of a login with `token`: derived from it, so the cookie is not the token."""
    return hmac.new(token.secret.encode(), b"sidewatch ui session", hashlib.sha256).hexdigest()


def _reader(request: Request) -> bool | None:
    """True: a reader; False: a token without the read scope; None: no (known) token."""
    tokens: tuple[Token, ...] = request.app.state.sidewatch.config.tokens
    if not tokens:
        return True  # no token configured: loopback only, every request allowed (as the API)
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    cookie = request.cookies.get(COOKIE, "")
    match = None
    for token in tokens:  # every token is compared: no early exit on a match
        by_header = scheme.lower() == "bearer" and hmac.compare_digest(
            token.secret.encode(), given.encode()
        )
        by_cookie = hmac.compare_digest(session_value(token).encode(), cookie.encode())
        if by_header or by_cookie:
            match = token
    return None if match is None else "read" in match.scopes


def page(name: str, status: int = 200, **context: Any) -> Response:
    html = ENV.get_template(name).render(**context)
    return Response(html, status, HEADERS, media_type="text/html; charset=utf-8")


def _guard(request: Request) -> Response | None:
    who = _reader(request)
    if who is None:
        response = page("login.html", 401, title="Sign in", failed=COOKIE in request.cookies)
        response.headers["WWW-Authenticate"] = 'Bearer realm="sidewatch"'
        return response
    if not who:
        return page(
            "error.html", 403, title="Forbidden", message="This token lacks the read scope."
        )
    return None


async def login_form(request: Request) -> Response:
    return page("login.html", title="Sign in", failed=False)


async def login(request: Request) -> Response:
    """The token arrives in a form body (never in a URL, so no log holds it); the cookie set
    is derived from it, HttpOnly and same-site."""
    app = request.app.state.sidewatch
    body = await request.body()  # whole within server.maxBodyBytes and requestTimeout, or refused
    given = parse_qs(body.decode("utf-8", "replace")).get("token", [""])[0].strip()
    match = None
    for token in app.config.tokens:
        if hmac.compare_digest(token.secret.encode(), given.encode()):
            match = token
    if match is None or "read" not in match.scopes:
        return page("login.html", 401, title="Sign in", failed=True)
    response = RedirectResponse("/ui/waits", 303, headers=HEADERS)
    response.set_cookie(
        COOKIE,
        session_value(match),
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    return response


async def home(request: Request) -> Response:
    if (refused := _guard(request)) is not None:
        return refused
    report = _latest_report(Path(request.app.state.sidewatch.config.report_directory))
    return page("home.html", title="sidewatch", report=report.name if report else None)


def _latest_report(directory: Path) -> Path | None:
    return max(directory.glob("sidewatch-report-*.html"), default=None)


async def latest_report(request: Request) -> Response:
    if (refused := _guard(request)) is not None:
        return refused
    path = _latest_report(Path(request.app.state.sidewatch.config.report_directory))
    if path is None:
        return page("error.html", 404, title="No report", message="No HTML report written yet.")
    return Response(path.read_bytes(), 200, HEADERS, media_type="text/html; charset=utf-8")


def list_waits(
    read: Read,
    filters: Mapping[str, str],
    now: int,
    cursor: str | None = None,
    policies: Collection[str] = (),
) -> dict[str, Any]:
    """The list page's data: a page of the waits that match `filters` at `now`, most urgent
    state first, each state longest in it first; every state's count (no filter); how many
    match and where the page is among them; the links to the next and previous pages, and
    the choices each filter offers (`policies`: the configured ones). Raises BadCursor."""
    states = {s.value for s in State}
    if filters.get("state"):
        states &= {filters["state"]}
    if filters.get("owner"):
        states &= {
            s.value for s, o in OWNER.items() if o is not None and o.value == filters["owner"]
        }
    chosen = Filters(
        frozenset(states),
        filters.get("policy") or None,
        {"yes": True, "no": False}.get(filters.get("uncertain", "")),
    )
    segments = [frozenset({s.value}) for s in ORDER]
    page = read.page(chosen, segments, LISTED, now, cursor)
    waits = page.waits
    for w in waits:
        w["severity"] = Severity.WARNING if w["uncertain"] and w["state"] in SEVERITY else None
        w["severity"] = w["severity"] or SEVERITY.get(w["state"], "closed")
    kept = {k: v for k, v in filters.items() if v}
    policy = filters.get("policy")
    choices = {
        "state": [s.value for s in ORDER],
        "policy": sorted({*policies, *([policy] if policy else [])}),
        "owner": sorted(o.value for o in Owner),
        "uncertain": ["yes", "no"],
    }
    return {
        "waits": waits,
        "counts": [(s.value, page.counts.get(s.value, 0)) for s in ORDER],
        "open": sum(page.counts.get(s.value, 0) for s in OPEN_STATES),
        "total": page.total,
        "first": page.start + 1 if waits else page.start,
        "last": page.start + len(waits),
        "next": _link({**kept, "cursor": page.next}) if page.next else None,
        "previous": _link({**kept, "cursor": page.previous}) if page.previous else None,
        "choices": choices,
    }


def _link(query: Mapping[str, str]) -> str:
    return "/ui/waits?" + urlencode(query)


FILTERS = ("state", "policy", "owner", "uncertain")


async def waits_page(request: Request) -> Response:
    if (refused := _guard(request)) is not None:
        return refused
    app = request.app.state.sidewatch
    filters = {k: request.query_params.get(k, "") for k in FILTERS}
    if filters["state"] and filters["state"] not in State.__members__:
        message = f"state must be one of {', '.join(State.__members__)}"
        return page("error.html", 400, title="Bad filter", message=message)
    if filters["owner"] and filters["owner"] not in {o.value for o in Owner}:
        message = f"owner must be one of {', '.join(o.value for o in Owner)}"
        return page("error.html", 400, title="Bad filter", message=message)
    if filters["uncertain"] not in ("", "yes", "no"):
        return page("error.html", 400, title="Bad filter", message="uncertain is yes or no")
    policies = [p.name for p in app.config.policies]
    cursor = request.query_params.get("cursor") or None
    try:
        data = await run_in_threadpool(list_waits, app.read, filters, _now_ms(), cursor, policies)
    except BadCursor as e:
        return page("error.html", 400, title="Bad page link", message=str(e))
    except StoreError:
        return page("error.html", 503, title="Store unavailable", message="Try again shortly.")
    return page("waits.html", title="Waits", filters=filters, **data)


def evidence_rows(w: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The four pieces of evidence, each present, failing or never reported (a decision not
    made yet is `not yet`)."""
    e, missing = w["evidence"], set(w["missing"])
    beat, now = e["lastHeartbeatAt"], w.get("evaluatedAt")
    fresh = w["thresholds"]["heartbeatFreshnessSeconds"] * 1000
    stale_beat = bool(beat and now and "out" not in beat + now and _ms(now) - _ms(beat) > fresh)
    status = {
        "route": "present" if e["route"] in ("delivered", "acknowledged") else "failing",
        "handle": "present" if e["resumeHandle"] else "failing",
        "heartbeat": "failing" if stale_beat else "present" if beat else "never reported",
        "decision": "present" if e["decision"] else "not yet",
    }
    values = {
        "route": (e["route"], e["approverRef"]),
        "handle": (e["resumeHandle"], None),
        "heartbeat": (beat, None),
        "decision": (e["decision"], e["decidedAt"]),
    }
    return [
        {
            "piece": piece,
            "status": "never reported" if piece in missing else status[piece],
            "value": values[piece][0],
            "detail": values[piece][1],
        }
        for piece in PIECES
    ]


AUDIT = "sidewatch audit --open"


def audit_command(config_path: str | None, db_url: str) -> str:
    """The `audit --open` line that reads this daemon's own store with its own policies, run
    on its host: the executable beside its interpreter (unless `sidewatch` on the PATH is
    that one), `--config` and `--db` absolute. The store URL goes without its password
    (PostgreSQL's client then reads PGPASSWORD or ~/.pgpass): a page never shows a secret."""
    from sqlalchemy.engine import make_url  # noqa: PLC0415 - only at start, once

    url = make_url(db_url)
    database = url.database
    local = url.drivername.startswith("sqlite") and database not in (None, "", ":memory:")
    if local and database and not database.startswith("file:"):  # relative to the daemon's
        url = url.set(database=os.path.abspath(database))  # directory, not the reader's
    line = [_own_executable(), "audit", "--open"]
    if config_path is not None:
        line += ["--config", shlex.quote(os.path.abspath(config_path))]
    bare = url._replace(password=None)  # URL.set(password=None) would leave it as it is
    line += ["--db", shlex.quote(bare.render_as_string(hide_password=False))]
    return " ".join(line)


def _own_executable() -> str:
    script = Path(sys.prefix) / "bin" / "sidewatch"  # the console script of this install
    found = shutil.which("sidewatch")
    if not script.exists():
        return f"{shlex.quote(sys.executable)} -m sidewatch"
    if found is not None and Path(found).resolve() == script.resolve():
        return "sidewatch"
    return shlex.quote(str(script))


def fix_commands(
    w: Mapping[str, Any], base: str, unreported: list[str], audit: str = AUDIT
) -> list[str]:
    """Copy-ready lines: the evidence event that would report each unreported piece, and the
    `audit` line (`audit_command`'s). Values are shell-quoted; the token is named by a
    variable, never written."""
    rid, thread = w["requestId"], w["threadId"]
    events = {
        "route": {"name": "sidewatch.route", "value": {"requestId": rid, "delivered": True}},
        "handle": {
            "name": "sidewatch.heartbeat",
            "value": {"threadId": thread, "resumeHandle": "<your durable handle>"},
        },
        "heartbeat": {"name": "sidewatch.heartbeat", "value": {"threadId": thread}},
        "decision": {
            "name": "sidewatch.decision",
            "value": {"requestId": rid, "decision": "accept"},
        },
    }
    lines = []
    for piece in unreported:
        event = {"type": "CUSTOM", **events[piece]}
        lines.append(
            'curl -sS -H "Authorization: Bearer $SIDEWATCH_INGEST_TOKEN" '
            "-H 'Content-Type: application/x-ndjson' "
            f"--data-binary {shlex.quote(orjson.dumps(event).decode())} "
            f"{shlex.quote((base.rstrip('/') or 'http://127.0.0.1:9477') + '/v1/events')}"
        )
    api = (base.rstrip("/") or "http://127.0.0.1:9477") + "/v1/waits/" + quote(rid, safe="@:/")
    lines.append(f'curl -sS -H "Authorization: Bearer $SIDEWATCH_READ_TOKEN" {shlex.quote(api)}')
    lines.append(audit)
    return lines


def _timeline_rows(w: Mapping[str, Any]) -> Markup:
    """The timeline's rows, evidence and transitions merged, each time also relative to the
    request. Built here, not in the template: a long timeline is most of the page, and the
    values that repeat (kinds, ids, flags) are escaped once."""
    start = w["evidence"]["requestedAt"]
    origin = _ms(start) if start and not start.startswith("out") else None
    events = [(t["at"] or "", 0, t) for t in w["timeline"]]
    events += [
        (t["at"] or "", 1, {"at": t["at"], "kind": "transition", "from": t["from"], "to": t["to"]})
        for t in w["transitions"]
    ]
    events.sort(key=lambda e: (e[0], e[1]))
    memo: dict[tuple[type, Any], str] = {}

    def cell(value: Any) -> str:
        key = (type(value), value)
        if key not in memo:
            memo[key] = str(escape(_finalize(value)))
        return memo[key]

    rows = []
    for at, _, item in events:
        rel = "—"
        if origin is not None and at and not at.startswith("out"):
            delta = (_ms(at) - origin) / 1000
            rel = ("+" if delta >= 0 else "-") + _dur(abs(delta))
        detail = " ".join(
            f"{cell(k)}=<code>{cell(v)}</code>" for k, v in item.items() if k not in ("at", "kind")
        )
        rows.append(
            f"<tr><td class=num>{rel}</td><td><time>{cell(at)}</time></td>"
            f"<td>{cell(item['kind'])}</td><td>{detail}</td></tr>"
        )
    return Markup("\n".join(rows))  # noqa: S704 (every value in it escaped above)


def runbooks(w: Mapping[str, Any], base: str) -> list[tuple[str, str]]:
    """(name, link) of the runbooks of the wait's state, then of unreported evidence when its
    state rests on some: those the alerts' `runbook_url` name (none for a closed state)."""
    paths = [runbook_path(w["state"])]
    if w["uncertain"] and w["missing"] and w["state"] in SEVERITY:
        paths.append(f"/runbooks/{UNREPORTED_RUNBOOK}")
    return [(p.rsplit("/", 1)[1], base.rstrip("/") + p) for p in paths if p is not None]


def in_state(w: Mapping[str, Any]) -> str | None:
    """How long the wait has been in its state at the page's `now` (`evaluatedAt`): "25 min";
    None when either time is out of range."""
    since, now = w["since"], w["evaluatedAt"]
    if not since or not now or "out" in since + now:
        return None
    return _dur(max(0, _ms(now) - _ms(since)) / 1000)


def route_channel(w: Mapping[str, Any]) -> str | None:
    """The channel of the latest route reported with one (a code such as `slack`)."""
    channels = [t["channel"] for t in w["timeline"] if t["kind"] == "route" and t.get("channel")]
    return channels[-1] if channels else None


def held_by(bound: Sequence[Bound]) -> list[dict[str, Any]]:
    """The service instances the tap (or runtime) bound the wait's thread to, each with
    whether its run survives the process and the instance's latest beat."""
    return [
        {
            "service": b.service,
            "instance": b.instance,
            "durable": f"durable: {'true' if b.durable else 'false'}",
            "boundAt": iso(b.at),
            "run": b.run_id,
            "lastBeatAt": iso(b.last_beat_at),
        }
        for b in bound
    ]


def detail_context(
    w: dict[str, Any], base: str, bound: Sequence[Bound] = (), audit: str = AUDIT
) -> dict[str, Any]:
    unreported = [m for m in PIECES if m in w["missing"]]
    handle = w["evidence"]["resumeHandle"]
    return {
        "w": w,
        "rows": evidence_rows(w),
        "timeline": _timeline_rows(w),
        "commands": fix_commands(w, base, unreported, audit),
        "severity": SEVERITY.get(w["state"], "closed"),
        "runbooks": runbooks(w, base),
        "in_state": in_state(w),
        "channel": route_channel(w),
        "bound": held_by(bound),
        # the resume handle as the runtime reported it (a heartbeat's or the interrupt's)
        "handle": None if "handle" in unreported else f"durable: {str(bool(handle)).lower()}",
    }


def _now_ms() -> int:
    """The wall clock, read here and passed in: the application layer reads none."""
    return int(time.time() * 1000)


def render_detail(
    w: dict[str, Any], base: str = "", bound: Sequence[Bound] = (), audit: str = AUDIT
) -> str:
    """One wait's page (pure: a function of `Read.wait`'s answer, the thread's service
    bindings and the daemon's `audit` line)."""
    context = detail_context(w, base, bound, audit)
    return ENV.get_template("wait.html").render(title=w["requestId"], **context)


def _detail(read: Read, request_id: str, now: int) -> tuple[dict[str, Any] | None, list[Bound]]:
    """A wait's answer and the service instances holding it (read in one worker thread)."""
    body = read.wait(request_id, now)
    if body is None:
        return None, []
    return body, read.store.bound_to(body["threadId"], body["runId"])


async def wait_page(request: Request) -> Response:
    if (refused := _guard(request)) is not None:
        return refused
    app = request.app.state.sidewatch
    request_id = request.path_params["request_id"]
    try:
        body, bound = await run_in_threadpool(_detail, app.read, request_id, _now_ms())
    except StoreError:
        return page("error.html", 503, title="Store unavailable", message="Try again shortly.")
    except StoreRefused:  # a requestId the store cannot even hold (a NUL) names no wait
        body, bound = None, []
    if body is None:
        return page("unknown.html", 404, title="No such wait", request_id=request_id)
    html = render_detail(body, app.config.external_url or "", bound, app.audit_command)
    return Response(html, 200, HEADERS, media_type="text/html; charset=utf-8")


async def runbook(request: Request) -> Response:
    """A runbook of sidewatch/daemon/runbooks as a page (its Markdown shown as text): the rules' and
    alerts' `runbook_url`. Only the names in that folder are served."""
    name = request.path_params["name"]
    known = {p.name: p for p in RUNBOOKS.glob("*.md")} if RUNBOOKS.is_dir() else {}
    path = known.get(name) or known.get(f"{name}.md")
    if path is None:
        message = f"No runbook of that name; the runbooks are: {', '.join(sorted(known))}."
        return page("error.html", 404, title="No such runbook", message=message)
    return page("runbook.html", title=path.stem, text=path.read_text())


ROUTES = [
    Route("/ui", home, methods=["GET"]),
    Route("/ui/login", login_form, methods=["GET"]),
    Route("/ui/login", login, methods=["POST"]),
    Route("/ui/report", latest_report, methods=["GET"]),
    Route("/ui/waits", waits_page, methods=["GET"]),
    Route("/ui/waits/{request_id:path}", wait_page, methods=["GET"]),
    Route("/runbooks/{name}", runbook, methods=["GET"]),
]
