"""A wait raised by a subagent, as the read API, the wait page and the reports show it: the
subagent's invocation id, name and state in the verdict's evidence, its events in the timeline,
and no wait of the subagent's own."""

from __future__ import annotations

import copy
import dataclasses
import html as htmllib
import json
import re
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sidewatch.config import Config
from sidewatch.daemon.serve import Daemon
from sidewatch.report.html import render_html
from sidewatch.report.markdown import render_markdown
from tests.daemon.test_http import NDJSON, ndjson

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette's note that it falls back to httpx
    from starlette.testclient import TestClient

SEC = 1000
SEED = Path(__file__).resolve().parents[1] / "fixtures" / "report-seed.json"
SUBAGENT = {"runId": "sub-1", "name": "researcher", "state": "suspended", "since": None}


def stream(now: int) -> list[dict[str, Any]]:
    """A run whose subagent asks for approval: the subagent suspends naming the interrupt,
    and the parent run ends with it (the interrupt also names the subagent)."""
    at = now - 60 * SEC
    return [
        {"type": "RUN_STARTED", "threadId": "t-sub", "runId": "r1", "timestamp": at},
        {
            "type": "SUBAGENT_STARTED",
            "subagentRunId": "sub-1",
            "name": "researcher",
            "description": "SECRET-DESCRIPTION",
            "timestamp": at + SEC,
        },
        {
            "type": "TOOL_CALL_START",
            "toolCallId": "c1",
            "toolCallName": "purge_cache",
            "timestamp": at + 2 * SEC,
        },
        {"type": "TOOL_CALL_END", "toolCallId": "c1", "timestamp": at + 2 * SEC},
        {
            "type": "SUBAGENT_FINISHED",
            "subagentRunId": "sub-1",
            "outcome": {"type": "suspended", "interruptIds": ["i1"]},
            "timestamp": at + 3 * SEC,
        },
        {
            "type": "RUN_FINISHED",
            "threadId": "t-sub",
            "runId": "r1",
            "timestamp": at + 4 * SEC,
            "outcome": {
                "type": "interrupt",
                "interrupts": [
                    {
                        "id": "i1",
                        "reason": "tool_call",
                        "toolCallId": "c1",
                        "subagentRunId": "sub-1",
                        "message": "SECRET-PROMPT",
                    }
                ],
            },
        },
    ]


@pytest.fixture
def now() -> int:
    return int(time.time()) * SEC


@pytest.fixture
def client(db_url: str, now: int) -> Iterator[TestClient]:
    config = dataclasses.replace(Config(), db_url=db_url, allowed_hosts=("testserver",))
    daemon = Daemon(config)
    client = TestClient(daemon.app)
    r = client.post("/v1/events", content=ndjson(stream(now)), headers=NDJSON)
    assert (200, 6, 0, []) == (
        r.status_code,
        r.json()["accepted"],
        r.json()["skipped"],
        r.json()["rejected"],
    )
    daemon.auditor.tick(now)
    yield client
    daemon.engine.dispose()


def test_the_read_api_shows_the_subagent_in_the_evidence_and_the_timeline(
    client: TestClient, now: int
) -> None:
    wait = client.get("/v1/waits/t-sub/i1").json()
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime((now - 57 * SEC) / 1000))

    assert {**SUBAGENT, "since": since} == wait["evidence"]["subagent"]
    assert [
        ("requested", None),
        ("subagent_started", "sub-1"),
        ("subagent_suspended", "sub-1"),
    ] == sorted(((i["kind"], i.get("subagentRunId")) for i in wait["timeline"]), key=str)


def test_a_subagents_suspension_is_no_wait_of_its_own(client: TestClient) -> None:
    waits = client.get("/v1/waits").json()["waits"]

    assert [("t-sub/i1", "sub-1")] == [
        (w["requestId"], w["evidence"]["subagent"]["runId"]) for w in waits
    ]


def test_the_wait_page_names_the_subagent(client: TestClient) -> None:
    page = client.get("/ui/waits/t-sub/i1").text
    shown = re.sub(r"\s+", " ", htmllib.unescape(re.sub(r"<[^>]+>", " ", page)))

    assert "Subagent sub-1 researcher · suspended since" in shown


@pytest.mark.parametrize(
    ("render", "line"),
    [
        pytest.param(
            render_markdown,
            "raised by subagent `sub-1` (researcher), suspended since 2026-07-26T16:00:02Z",
            id="markdown",
        ),
        pytest.param(
            render_html,
            "Subagent sub-1 researcher · suspended since 2026-07-26 16:00:02 UTC",
            id="html",
        ),
    ],
)
def test_the_reports_name_the_subagent_of_a_problem_wait(
    render: Callable[..., str], line: str
) -> None:
    report: dict[str, Any] = copy.deepcopy(json.loads(SEED.read_text()))
    report["problemWaits"][0]["evidence"]["subagent"] = {
        **SUBAGENT,
        "since": "2026-07-26T16:00:02Z",
    }

    out = render(report)
    shown = re.sub(r"\s+", " ", htmllib.unescape(re.sub(r"<[^>]+>", " ", out)))

    assert line in shown
