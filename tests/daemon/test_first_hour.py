"""The first hour with a real daemon: what is posted is audited within a second or two, the
wait page's `audit` line runs where it is shown, a standby says it is one, and the list of
waits does not break ids mid-word in Chromium at 1280 px."""

from __future__ import annotations

import html
import itertools
import json
import os
import re
import shlex
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from tests.daemon.chromium import Chromium
from tests.daemon.test_e2e import (
    Server,
    _audited,
    _seed_relative_to_now,
    _series,
    _start,
    _stop,
    _wait_for,
)
from tests.daemon.test_nats import NATS_URL, Stream, _js, _message, _publish

ROOT = Path(__file__).resolve().parents[2]
NDJSON = {"content-type": "application/x-ndjson"}
PROMPT = 2.5  # seconds: "within a second or two" of the post's answer, on a loaded machine


def _agree(server: Server) -> tuple[dict[str, int], dict[str, int]]:
    """The open waits by state, as the list says and as /metrics says."""
    listed = Counter(
        w["state"] for w in httpx.get(f"{server.url}/v1/waits?open=true").json()["waits"]
    )
    metrics = _series(httpx.get(f"{server.url}/metrics").text)
    exported = {
        re.search(r'state="(\w+)"', k).group(1): int(v)  # type: ignore[union-attr]
        for k, v in metrics.items()
        if k.startswith("sidewatch_waits{") and v
    }
    return dict(listed), exported


def test_what_is_posted_is_audited_within_two_seconds_not_at_the_next_interval(
    tmp_path: Path, db_url: str
) -> None:
    server = _start(tmp_path, db_url, interval="60s")  # the interval's tick: a minute away
    try:
        assert _wait_for(lambda: "audit every" in server.log.read_text())
        body, _ = _seed_relative_to_now()
        posted = httpx.post(f"{server.url}/v1/events", content=body, headers=NDJSON)
        answered = time.monotonic()
        assert 200 == posted.status_code
        assert _wait_for(lambda: _audited(server, 6), PROMPT)
        first = time.monotonic() - answered
        deploy = httpx.get(f"{server.url}/v1/waits/thread-deploy/int-deploy").json()
        listed, exported = _agree(server)

        assert first < PROMPT
        assert "STUCK_AFTER_DECISION" == deploy["transitions"][-1]["to"]
        assert {"STALE", "ORPHANED", "STUCK_AFTER_DECISION", "WAITING", "UNROUTABLE"} == set(listed)
        assert listed == exported

        decline = {
            "type": "CUSTOM",
            "name": "sidewatch.decision",
            "value": {"threadId": "thread-export", "interruptId": "int-export"}
            | {"decision": "decline"},
        }
        again = httpx.post(f"{server.url}/v1/events", content=json.dumps(decline), headers=NDJSON)
        answered = time.monotonic()
        assert 200 == again.status_code

        def closed() -> bool:
            export = httpx.get(f"{server.url}/v1/waits/thread-export/int-export").json()
            return export["transitions"][-1]["to"] == "CLOSED_BY_DECLINE"

        assert _wait_for(closed, PROMPT)
        second = time.monotonic() - answered
        listed, exported = _agree(server)

        assert second < PROMPT
        assert "WAITING" not in listed
        assert listed == exported
    finally:
        _stop(server)


@pytest.fixture
def jetstream() -> Iterator[Stream]:
    name = f"SWTEST_{uuid.uuid4().hex[:12]}"
    subject = f"swtest.{name.lower()}"
    _js(lambda js: js.add_stream(name=name, subjects=[f"{subject}.>"]))
    yield Stream(name, subject)
    _js(lambda js: js.delete_stream(name))


def test_what_jetstream_delivers_is_audited_within_two_seconds_too(
    tmp_path: Path, jetstream: Stream
) -> None:
    server = _start(
        tmp_path,
        f"sqlite:///{tmp_path / 'sw.db'}",
        interval="60s",
        extra=f"nats: {{url: '{NATS_URL}', stream: {jetstream.name}, "
        f"subject: '{jetstream.subject}.>', batch: 8, ackWait: 2s, retryDelay: 300ms}}\n",
    )
    try:
        assert _wait_for(lambda: "audit every" in server.log.read_text())
        time.sleep(1)  # the start's tick is done: only a prompt one can audit what follows
        _publish(jetstream, _message(0))
        published = time.monotonic()

        audited = _wait_for(lambda: _audited(server, 1), PROMPT + 1)
        took = time.monotonic() - published
    finally:
        _stop(server)

    assert audited
    assert took < PROMPT + 1  # the consumer's fetch, then the prompt tick


def test_a_burst_of_posts_makes_a_tick_a_second_at_most(tmp_path: Path) -> None:
    server = _start(tmp_path, f"sqlite:///{tmp_path / 'sw.db'}", interval="60s")
    try:
        assert _wait_for(lambda: "audit every" in server.log.read_text())
        for n in range(20):
            beat = {"type": "CUSTOM", "name": "sidewatch.route"}
            beat["value"] = {"threadId": f"t-{n}", "interruptId": "i", "delivered": True}
            assert (
                200
                == httpx.post(
                    f"{server.url}/v1/events", content=json.dumps(beat), headers=NDJSON
                ).status_code
            )
        time.sleep(PROMPT)
        ticks = _series(httpx.get(f"{server.url}/metrics").text)
    finally:
        _stop(server)

    # The start's tick and at most one prompt tick a second since (the burst took a moment).
    assert 2 <= ticks["sidewatch_audit_duration_seconds_count"] <= 1 + PROMPT + 2
    # Each route named a thread no interrupt announced: kept, and a finding each.
    assert 20 == ticks['sidewatch_protocol_findings_total{rule="evidence_unknown_thread"}']


def test_the_wait_pages_audit_line_runs_where_it_is_shown(tmp_path: Path) -> None:
    store = tmp_path / "daemon" / "sw.db"
    store.parent.mkdir()
    server = _start(tmp_path, f"sqlite:///{store}", interval="60s")
    try:
        body, _ = _seed_relative_to_now()
        httpx.post(f"{server.url}/v1/events", content=body, headers=NDJSON)
        page = httpx.get(f"{server.url}/ui/waits/thread-deploy%2Fint-deploy").text
    finally:
        _stop(server)
    (line,) = [
        html.unescape(m) for m in re.findall(r"<pre class=cmd>([^<]*audit --open[^<]*)<", page)
    ]
    config = next(tmp_path.glob("sidewatch-*.yaml"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    assert line.endswith(f" audit --open --config {config} --db sqlite:///{store}")
    run = subprocess.run(
        shlex.split(line),
        check=False,
        cwd=elsewhere,  # not the daemon's directory: its ./sidewatch.db would be another store
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (0, "") == (run.returncode, run.stderr)
    assert re.search(r"^thread-deploy/int-deploy\s+STUCK_AFTER_DECISION", run.stdout, re.M)
    assert not list(elsewhere.iterdir())  # it created no store of its own


def _log(server: Server) -> str:
    return server.log.read_text()


HOLDS = "holds the audit lease (epoch"
STANDBY = "standby: another replica holds the audit lease"


def test_a_standby_says_so_at_start_and_when_it_takes_over_or_loses_the_lease(
    tmp_path: Path, db_url: str
) -> None:
    first = _start(tmp_path, db_url, interval="1s")
    second = None
    try:
        assert _wait_for(lambda: HOLDS in _log(first))
        second = _start(tmp_path, db_url, interval="1s")
        assert _wait_for(lambda: STANDBY in _log(second))
        assert HOLDS not in _log(second)

        _stop(first)  # releases the lease: the standby takes it within an interval or two
        assert _wait_for(lambda: HOLDS in _log(second))

        engine = create_engine(db_url)  # another replica takes it over for a long while
        with engine.begin() as conn:
            conn.execute(
                text(
                    "UPDATE lease SET holder = 'elsewhere', epoch = epoch + 1, "
                    "expires_at = expires_at + 3600000"
                )
            )
        engine.dispose()
        assert _wait_for(lambda: "lost the audit lease" in _log(second))
        assert _wait_for(lambda: _log(second).count(STANDBY) == 2)
        said = [json.loads(line)["msg"] for line in _log(second).splitlines()]
        roles = [m for m in said if m.startswith(("standby", "holds", "lost"))]

        assert [STANDBY, HOLDS, "lost", STANDBY] == [
            next(p for p in (STANDBY, HOLDS, "lost") if m.startswith(p)) for m in roles
        ]
    finally:
        _stop(first)
        if second is not None:
            _stop(second)


# -- the list at 1280 px -------------------------------------------------------------------

LONG_THREAD = "customer-support-escalations-eu-west-1-tenant-4711-conversation-20261204"
LONG_INTERRUPT = "approve-refund-over-the-agent-limit-000123"
LONG_ACTION = "issue_refund_above_threshold_with_manager_override"
# Each code element of the list, as the lines it is laid out on.
LINES_JS = """JSON.stringify([document.documentElement.scrollWidth].concat(
 [...document.querySelectorAll('table.waits code')].map(el => {
  const lines = []; let top = null;
  const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (let i = 0; i < node.length; i++) {
      const range = document.createRange(); range.setStart(node, i); range.setEnd(node, i + 1);
      const rect = range.getClientRects()[0];
      if (!rect) continue;
      if (top === null || rect.top > top + 2) { lines.push(''); top = rect.top; }
      lines[lines.length - 1] += node.data[i];
    }
  }
  return lines;
})))"""


@pytest.fixture
def listed(tmp_path: Path) -> Iterator[Server]:
    """A daemon holding the reference audit."""
    server = _start(tmp_path, f"sqlite:///{tmp_path / 'sw.db'}", interval="60s")
    try:
        body, _ = _seed_relative_to_now()
        assert (
            200 == httpx.post(f"{server.url}/v1/events", content=body, headers=NDJSON).status_code
        )
        assert _wait_for(lambda: _audited(server, 6))
        yield server
    finally:
        _stop(server)


def _long_names() -> bytes:
    """The reference audit's WAITING wait again, with long names."""
    body, _ = _seed_relative_to_now()
    return (
        body.decode()
        .replace("thread-export", LONG_THREAD)
        .replace("int-export", LONG_INTERRUPT)
        .replace("export_dataset", LONG_ACTION)
        .replace("run-export", "run-long")
        .encode()
    )


def _laid_out(browser: Chromium, server: Server) -> tuple[list[list[str]], list[list[str]]]:
    """The list at 1280 px: each row's request id and action as the lines they are laid on
    (the page itself never wider than the screen)."""
    visit = browser.visit(f"{server.url}/ui/waits", width=1280, evaluate=LINES_JS)
    page_width, *codes = json.loads(visit.value)
    assert (200, [], 1280) == (visit.status, visit.console, page_width)
    return codes[0::2], codes[1::2]  # each row: its request id, then its action


def test_the_list_breaks_no_id_or_action_mid_word_at_1280_px(
    listed: Server, tmp_path: Path
) -> None:
    browser = Chromium(tmp_path / "profile")
    try:
        ids, actions = _laid_out(browser, listed)
        posted = httpx.post(f"{listed.url}/v1/events", content=_long_names(), headers=NDJSON)
        assert 200 == posted.status_code
        assert _wait_for(lambda: _audited(listed, 7))
        crowded_ids, crowded_actions = _laid_out(browser, listed)
    finally:
        browser.close()

    # The reference ids and actions each fit on one line.
    assert 6 == len(ids) == len(actions)
    assert [] == [lines for lines in ids + actions if len(lines) != 1]
    # With a long id and action among them, the id breaks only after its "/" (or before an
    # "@run"), never inside a name; no action name breaks.
    assert 7 == len(crowded_ids) == len(crowded_actions)
    assert [] == [lines for lines in crowded_actions if len(lines) != 1]
    assert [LONG_ACTION] in crowded_actions
    for lines in crowded_ids:
        for before, after in itertools.pairwise(lines):
            assert before.endswith("/") or after.startswith("@"), lines
    assert f"{LONG_THREAD}/{LONG_INTERRUPT}" in ["".join(lines) for lines in crowded_ids]
