"""The docs' evidence page, "Verdicts you can trust": every `curl` line there is a complete
evidence event that `POST /v1/events` accepts, and together they leave a wait with nothing
missing."""

from __future__ import annotations

import json
import re
import shlex
import time
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

from starlette.testclient import TestClient

from sidewatch.config import Config
from sidewatch.daemon.serve import Daemon
from tests.daemon.test_http import NDJSON, ndjson, requested

README = Path(__file__).resolve().parents[1] / "docs" / "concepts" / "evidence.md"


def section(title: str) -> str:
    text = README.read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end]


def curls() -> list[tuple[str, dict[str, str], bytes]]:
    """(url, headers, body) of each curl line of the section."""
    out = []
    for line in re.findall(r"^curl .*$", section("Verdicts you can trust"), re.M):
        words = shlex.split(line)
        headers = dict(
            tuple(h.split(": ", 1))  # type: ignore[misc]
            for flag, h in pairwise(words)
            if flag == "-H"
        )
        url = next(w for w in words if w.startswith("http"))
        out.append((url, headers, words[words.index("-d") + 1].encode()))
    return out


def test_each_piece_of_evidence_has_a_curl_line_with_a_complete_event() -> None:
    names = [json.loads(body)["name"] for _, _, body in curls()]

    assert [
        "sidewatch.route",
        "sidewatch.heartbeat",
        "sidewatch.heartbeat",
        "sidewatch.decision",
    ] == names
    for url, headers, _ in curls():
        assert "http://127.0.0.1:9477/v1/events" == url
        assert {"Content-Type": "application/json"} == headers


def test_the_readme_curl_bodies_are_accepted_and_leave_nothing_missing(db_url: str) -> None:
    # TestClient sends `Host: testserver`, which a token-less daemon refuses unless named.
    daemon = Daemon(replace(Config(), db_url=db_url, allowed_hosts=("testserver",)))
    try:
        before_decision, after, answers = _send_the_readme_lines(daemon)
    finally:
        daemon.engine.dispose()

    assert [(200, 1, [])] * 4 == answers
    assert ("WAITING", "awaiting_decision", False, []) == (
        before_decision["state"],
        before_decision["phase"],
        before_decision["uncertain"],
        before_decision["missing"],
    )
    assert ("WAITING", "accept", []) == (
        after["state"],
        after["evidence"]["decision"],
        after["missing"],
    )


def _send_the_readme_lines(daemon: Daemon) -> tuple[dict, dict, list[tuple[int, int, list]]]:
    """An interrupted run without a handle, then the README's lines; the verdict after the
    heartbeats and after the decision."""
    client = TestClient(daemon.app)
    now = int(time.time() * 1000)
    run = requested("thread-1", "int-1", "deploy_service", now - 60_000, now + 3_600_000, False)
    run[-1]["outcome"]["interrupts"][0].pop("metadata", None)  # no handle but the heartbeat's
    assert 200 == client.post("/v1/events", content=ndjson(run), headers=NDJSON).status_code
    answers = []
    for _, headers, body in curls():
        r = client.post("/v1/events", content=body, headers=headers)
        answers.append((r.status_code, r.json()["accepted"], r.json()["rejected"]))
        if json.loads(body)["name"] == "sidewatch.heartbeat":
            before_decision = client.get("/v1/waits/thread-1%2Fint-1").json()  # evaluated now
    after = client.get("/v1/waits/thread-1%2Fint-1").json()

    return before_decision, after, answers
