"""The wait pages in a real browser: `sidewatch serve` holds the reference audit (shifted to
now) behind tokens, and headless Chromium opens `/ui/waits` and each wait's page with the read
token in its header, and without it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from sidewatch.core.text import wait_page_url
from tests.daemon.chromium import Chromium
from tests.daemon.test_e2e import Server, _audited, _seed_relative_to_now, _start, _stop, _wait_for

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures"
READ = "read-secret-0123456789"
INGEST = "ingest-secret-0123456789"
TOKENS = (
    f", tokens: [{{name: reader, token: {READ}, scopes: [read]}}, "
    f"{{name: agent, token: {INGEST}, scopes: [ingest]}}]"
)
UNAUTHORIZED = (
    "log error (network): Failed to load resource: the server responded with a status of "
    "401 (Unauthorized)"
)
# The reference audit's six states, most urgent first: pages, the ticket, the long wait, closed.
URGENCY = [
    "STUCK_AFTER_DECISION",
    "ORPHANED",
    "UNROUTABLE",
    "STALE",
    "WAITING",
    "CLOSED_BY_DECLINE",
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("ui")
    server = _start(tmp, f"sqlite:///{tmp / 'sw.db'}", server=TOKENS)
    try:
        body, _ = _seed_relative_to_now()
        posted = httpx.post(
            f"{server.url}/v1/events",
            content=body,
            headers={"content-type": "application/x-ndjson", "authorization": f"Bearer {INGEST}"},
        )
        assert 200 == posted.status_code, posted.text
        assert _wait_for(lambda: _audited(server, 6))  # /metrics is open on loopback
        yield server
    finally:
        _stop(server)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chromium]:
    chromium = Chromium(tmp_path_factory.mktemp("profile"))
    yield chromium
    chromium.close()


def text_of(html: str) -> str:
    body = re.sub(r"<(style|title|head)[^>]*>.*?</\1>", " ", html, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", body)).replace("&amp;", "&")


def test_the_list_shows_the_six_states_most_urgent_first_without_a_console_message(
    served: Server, browser: Chromium
) -> None:
    visit = browser.visit(f"{served.url}/ui/waits", {"Authorization": f"Bearer {READ}"})

    assert 200 == visit.status
    assert [] == visit.console
    assert URGENCY == re.findall(r'<tr class="st-\w+" data-state="(\w+)">', visit.html)


def test_each_wait_page_shows_its_evidence_table_and_next_move(
    served: Server, browser: Chromium
) -> None:
    expected = json.loads((SHARED / "seed-audit.expected.json").read_text())

    for request_id, state in expected["expected"].items():
        visit = browser.visit(
            wait_page_url(served.url, request_id), {"Authorization": f"Bearer {READ}"}
        )
        text = text_of(visit.html)

        assert (200, []) == (visit.status, visit.console), request_id
        assert f'<span class="badge st-{state}">{state}</span>' in visit.html
        assert '<table class="evidence">' in visit.html
        assert re.search(r"route (present|failing|never reported)", text), request_id
        assert "Next safe move:" in text


def test_without_the_token_the_browser_gets_401_and_the_login_form(
    served: Server, browser: Chromium
) -> None:
    for path in ("/ui", "/ui/waits", "/ui/waits/thread-deploy%2Fint-deploy"):
        visit = browser.visit(f"{served.url}{path}")

        assert 401 == visit.status, path
        assert [UNAUTHORIZED] == visit.console, path  # the browser's own note of the 401
        assert "thread-deploy" not in text_of(visit.html).replace("sidewatch", "")
        assert 'name="token"' in visit.html


def test_the_console_check_sees_an_error(browser: Chromium, tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text("<!doctype html><title>broken</title><script>undefinedFunction()</script>")

    visit = browser.visit(page.as_uri())

    assert any(m.startswith("exception") for m in visit.console)
