"""The lists never lie (issue 29): `/ui/waits` and `GET /v1/waits` page through the store
along its index, their counts and totals are the store's, made true at the time they are
evaluated, and a list that shows fewer waits than match says so (`total`, `next`). Each test
on a real daemon (TestClient) over real SQLite and real PostgreSQL."""

from __future__ import annotations

import base64
import re
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson
import pytest

from sidewatch.app.read import Read
from sidewatch.core.model import CLOSED_STATES, OPEN_STATES, State
from sidewatch.daemon.serve import Daemon
from sidewatch.store.auditstate import AuditState, StoredState
from tests.daemon.test_http import (
    MIN,
    NDJSON,
    SEC,
    decision,
    heartbeat,
    make_daemon,  # noqa: F401 - the fixture
    ndjson,
    requested,
    route,
)
from tests.daemon.test_ui import listed_states, text_of

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette's note that it falls back to httpx
    from starlette.testclient import TestClient

HOUR = 60 * MIN
DASH = "\u2013"  # of "showing 1–100 of 14,370"  # noqa: RUF003
OPEN = {s.value for s in OPEN_STATES}


@pytest.fixture
def now() -> int:
    return int(time.time()) * SEC


@pytest.fixture
def daemon(make_daemon: Callable[..., Daemon]) -> Daemon:  # noqa: F811
    return make_daemon()


@pytest.fixture
def client(daemon: Daemon) -> TestClient:
    return TestClient(daemon.app)


def post(client: TestClient, lines: list[dict[str, Any]]) -> None:
    for k in range(0, len(lines), 1400):  # bodies well under maxBodyBytes
        r = client.post("/v1/events", content=ndjson(lines[k : k + 1400]), headers=NDJSON)
        assert 200 == r.status_code, r.text


def cancelled(thread: str, asked: int, at: int) -> list[dict[str, Any]]:
    """A wait asked at `asked`, routed, and dismissed at `at` (CANCELLED)."""
    return [
        *requested(thread, "int", "deploy", asked, asked + 24 * HOUR),
        route(thread, "int", asked + SEC),
        decision(thread, "int", at, "cancel"),
    ]


def unroutable(thread: str, at: int) -> list[dict[str, Any]]:
    """A wait nobody could be told of (UNROUTABLE), its run alive."""
    return [
        *requested(thread, "int", "rotate_keys", at, at + 24 * HOUR),
        route(thread, "int", at + SEC, delivered=False),
        heartbeat(thread, at + 2 * SEC),
    ]


def waiting(thread: str, at: int, beat: int | None = None) -> list[dict[str, Any]]:
    """A wait routed and waiting for its approver, its run alive (a beat at `beat`)."""
    return [
        *requested(thread, "int", "export", at, at + 24 * HOUR),
        route(thread, "int", at + SEC),
        heartbeat(thread, beat or at + 2 * SEC),
    ]


def api(client: TestClient, query: str) -> dict[str, Any]:
    r = client.get(f"/v1/waits{query}")
    assert 200 == r.status_code, r.text
    body: dict[str, Any] = r.json()
    return body


def rids(body: dict[str, Any]) -> list[str]:
    return [w["requestId"] for w in body["waits"]]


def tiles(html: str) -> dict[str, str]:
    """The count of each state's tile, as the page shows it."""
    found = re.findall(r'<span class="badge st-(\w+)">\1</span></a><span class="n">([\d,]+)<', html)
    return dict(found)


def test_a_fresh_unroutable_wait_behind_1005_closed_ones_is_counted_listed_and_totalled(
    daemon: Daemon, client: TestClient, now: int
) -> None:
    # The reproduction: 1,005 waits cancelled two hours ago, one fresh UNROUTABLE.
    lines = [
        x for k in range(1005) for x in cancelled(f"t-old-{k}", now - 3 * HOUR, now - 2 * HOUR)
    ]
    post(client, [*lines, *unroutable("t-new", now - 5 * MIN)])
    daemon.auditor.tick(now)

    page = client.get("/ui/waits").text
    only = client.get("/ui/waits?state=UNROUTABLE").text
    everything = api(client, "")
    problems = api(client, "?open=true")

    assert "1 open." in text_of(page)
    assert {"UNROUTABLE": "1", "CANCELLED": "1,005"} == {
        s: n for s, n in tiles(page).items() if n != "0"
    }
    assert ["UNROUTABLE"] == listed_states(only)
    assert ["t-new/int"] == shown(only) and f"showing 1{DASH}1 of 1" in text_of(only)
    assert 1006 == everything["total"] and 100 == len(everything["waits"])
    assert everything["next"] is not None
    assert ["t-new/int"] == rids(problems)
    assert (1, None) == (problems["total"], problems["next"])


def test_paging_with_the_cursor_gives_every_wait_once_in_order_as_new_waits_arrive(
    daemon: Daemon, client: TestClient, now: int
) -> None:
    # Waits in pairs asked at the same instant (the order's ties), half of them closed.
    lines: list[dict[str, Any]] = []
    for k in range(40):
        asked = now - 2 * HOUR + (k // 2) * MIN
        for side in ("a", "B"):  # "B" < "a" by code point, the other way in many collations
            thread = f"t-{k:02d}-{side}"
            if k % 2:
                lines += cancelled(thread, asked, asked + 5 * SEC)
            else:
                lines += waiting(thread, asked)
    post(client, lines)
    daemon.auditor.tick(now)
    before = set(rids(api(client, "?limit=1000")))

    seen: list[dict[str, Any]] = []
    body = api(client, "?limit=7")
    first_total = body["total"]
    pages = 0
    while True:
        seen += body["waits"]
        pages += 1
        # A new wait arrives between pages; every other time the auditor records it first.
        post(client, waiting(f"t-new-{pages}", now - 30 * MIN + pages * SEC))
        if pages % 2:
            daemon.auditor.tick(now)
        if body["next"] is None:
            break
        body = api(client, f"?limit=7&cursor={body['next']}")

    got = [w["requestId"] for w in seen]
    keys = [(w["since"], w["requestId"], w["threadId"]) for w in seen]
    assert 80 == first_total == len(before)
    assert len(got) == len(set(got)), Counter(got).most_common(3)
    assert before <= set(got)
    assert keys == sorted(keys)
    assert pages >= 12


def test_the_page_of_a_state_walks_forward_and_back_and_says_where_it_is(
    daemon: Daemon, client: TestClient, now: int
) -> None:
    lines = [
        x
        for k in range(150)
        for x in cancelled(f"t-{k:03d}", now - 3 * HOUR + k * SEC, now - 2 * HOUR)
    ]
    post(client, [*lines, *waiting("t-open", now - 10 * MIN)])
    daemon.auditor.tick(now)

    first = client.get("/ui/waits?state=CANCELLED").text
    second = client.get(link(first, "next")).text
    back = client.get(link(second, "prev")).text

    assert f"showing 1{DASH}100 of 150" in text_of(first)
    assert f"showing 101{DASH}150 of 150" in text_of(second)
    assert 'rel="prev"' not in first and 'rel="next"' not in second
    assert listed_states(second) == ["CANCELLED"] * 50
    assert shown(first) == shown(back)
    assert shown(first) + shown(second) == [f"t-{k:03d}/int" for k in range(150)]
    assert "state=CANCELLED" in link(first, "next")


def link(html: str, rel: str) -> str:
    found = re.search(rf'<a href="([^"]+)" rel="{rel}">', html)
    assert found is not None, f"no {rel} link"
    return found.group(1).replace("&amp;", "&")


def shown(html: str) -> list[str]:
    """The request ids the page lists, as their text (the page lays an id out as its parts,
    with a line break allowed after each "/")."""
    codes = (re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<code>(.*?)</code>", html))
    return [c for c in codes if c.endswith("/int")]


def test_a_wait_changed_since_it_was_recorded_is_counted_and_listed_as_it_is_now(
    daemon: Daemon, client: TestClient, now: int
) -> None:
    beat = now - 30 * SEC
    post(
        client,
        [
            *waiting("t-dismissed", now - 20 * MIN, beat),
            *waiting("t-expiring", now - 10 * MIN, beat),
        ],
    )
    daemon.auditor.tick(now)
    # New evidence the auditor has not seen: the thread is dirty, its record WAITING.
    post(client, [decision("t-dismissed", "int", now - MIN, "cancel")])

    page = client.get("/ui/waits").text
    listed = api(client, "?state=WAITING")
    closed = api(client, "?state=CANCELLED")
    # Time alone: at a later `now` the other expires (its record is due), never recorded.
    read = Read(daemon.store, daemon.auditor.policy_for)
    later = read.waits({"WAITING", "STALE"}, 10, now + 25 * HOUR)

    assert "1 open." in text_of(page)
    assert {"WAITING": "1", "CANCELLED": "1"} == {s: n for s, n in tiles(page).items() if n != "0"}
    assert (["t-expiring/int"], 1) == (rids(listed), listed["total"])
    assert (["t-dismissed/int"], 1) == (rids(closed), closed["total"])
    assert (["STALE"], 1) == ([w["state"] for w in later["waits"]], later["total"])


@pytest.mark.parametrize(
    "cursor",
    [
        pytest.param("not a cursor", id="garbage"),
        pytest.param("e30", id="json-not-a-key"),
        pytest.param(
            base64.urlsafe_b64encode(orjson.dumps(["a", "WAITING", 1, "x\u0000", "t"])).decode(),
            id="nul",
        ),
        pytest.param(
            base64.urlsafe_b64encode(orjson.dumps(["a", "WAITING", 2**63, "x", "t"])).decode(),
            id="time-out-of-range",
        ),
        pytest.param("A" * 5000, id="too-long"),
    ],
)
def test_a_cursor_the_list_did_not_give_is_400_with_a_clear_message(
    client: TestClient, cursor: str
) -> None:
    r = client.get("/v1/waits", params={"cursor": cursor})
    page = client.get("/ui/waits", params={"cursor": cursor})

    assert 400 == r.status_code
    assert "cursor is not one this list gave" in r.json()["error"]
    assert 400 == page.status_code and "cursor is not one this list gave" in page.text


def test_a_cursor_of_another_list_is_400(daemon: Daemon, client: TestClient, now: int) -> None:
    beat = now - 30 * SEC
    post(client, [*waiting("t-1", now - 20 * MIN, beat), *waiting("t-2", now - 10 * MIN, beat)])
    daemon.auditor.tick(now)
    cursor = api(client, "?state=WAITING&limit=1")["next"]
    assert cursor is not None

    r = client.get("/v1/waits", params={"state": "CANCELLED", "cursor": cursor})

    assert 400 == r.status_code
    assert "WAITING, a state this list does not show" in r.json()["error"]


# -- at 100,000 waits ---------------------------------------------------------------------

SEEDED = 100_000
STATES = [s.value for s in State]


def seeded(k: int, now: int) -> StoredState:
    """A recorded verdict of a thread without facts, listed after every real wait (its
    `since` is later): the store's counts are what is tested of it."""
    state = STATES[(k * 7919) % len(STATES)]
    return StoredState(
        request_id=f"s-{k}/i", thread_id=f"s-{k}", policy="default", state=state,
        closed=State(state) in CLOSED_STATES, since=now + HOUR + k, due_at=None,
        requested_at=now - HOUR, decided_at=None, receipt_at=None, evaluated_at=now,
        uncertain=k % 3 == 0,
    )  # fmt: skip


@pytest.fixture
def crowded(daemon: Daemon, client: TestClient, now: int) -> Iterator[Counter[str]]:
    """100,000 recorded waits, written as the auditor writes them (one save: COPY on
    PostgreSQL), beside real ones: two recorded, one arrived since (a dirty thread)."""
    rows = [seeded(k, now) for k in range(SEEDED)]
    AuditState(daemon.store.engine).save(rows, [], [], [])
    post(
        client,
        [
            *unroutable("t-real-1", now - 30 * MIN),
            *waiting("t-real-2", now - 20 * MIN, now - 30 * SEC),
        ],
    )
    daemon.auditor.tick(now)
    post(client, unroutable("t-real-3", now - 10 * MIN))
    yield Counter(r.state for r in rows) + Counter({"UNROUTABLE": 2, "WAITING": 1})


def test_at_100000_waits_every_count_and_total_is_exact(
    client: TestClient, crowded: Counter[str]
) -> None:
    page = client.get("/ui/waits").text
    certain = client.get("/ui/waits?state=RESUMED&uncertain=no").text
    everything = api(client, "?limit=10")
    problems = api(client, "?open=true&limit=10")
    per_state = {s: api(client, f"?state={s}&limit=1")["total"] for s in STATES}

    assert SEEDED + 3 == everything["total"] == sum(crowded.values())
    assert sum(crowded[s] for s in OPEN) == problems["total"]
    assert dict(crowded) == {s: n for s, n in per_state.items() if n}
    assert {s: f"{crowded[s]:,}" for s in STATES} == tiles(page)
    assert f"{sum(crowded[s] for s in OPEN):,} open." in text_of(page)
    resumed_certain = sum(
        1 for k in range(SEEDED) if STATES[(k * 7919) % len(STATES)] == "RESUMED" and k % 3
    )
    # (No page of them can be shown: the seeded verdicts have no facts to show.)
    assert f"{resumed_certain:,} wait(s)" in text_of(certain)
    # The real waits come first (the seeded ones are later in their state), the fresh one too.
    assert {"t-real-1/int", "t-real-2/int", "t-real-3/int"} == set(rids(everything))
    assert everything["next"] is not None
    assert parse_qs(urlsplit(link(page, "next")).query)["cursor"]
