"""A real daemon fed a line a body (HTTP) or an event a message (JetStream), each event naming
its run, gives the ADK and CrewAI captures the verdicts and findings of their whole stream
(crewai's `interrupt_reported_as_success` is decided at a run's end in a later body): the
same capture, its thread renamed, is posted whole beside it and read back from the same
ticks."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.daemon.test_e2e import Server, _start, _stop, _wait_for
from tests.daemon.test_nats import Stream, _publish, stream  # noqa: F401 (a fixture)
from tests.daemon.test_nats import _start as _start_nats
from tests.ingest.producers.captures import capture
from tests.ingest.test_cuts import named

WAITS = {"adk-approve-default": 1, "adk-two-confirmations-default": 2, "crewai-approve-default": 1}
NDJSON = {"content-type": "application/x-ndjson"}


def threads(body: bytes) -> list[bytes]:
    return sorted({line.split(b'"threadId":')[1].split(b'"')[1] for line in named(body)})


def whole(name: str) -> bytes:
    """The capture with every thread id renamed `whole-…`, so that both copies live apart."""
    body = capture(name)
    for thread in threads(body):
        body = body.replace(b'"' + thread, b'"whole-' + thread)
    return body


Verdict = tuple[str, str | None, str | None, bool, str | None, tuple[str, ...]]


def verdicts(server: Server, count: int) -> dict[str, dict[str, Verdict]]:
    """(state, action, its digest, uncertain, decision, findings) of every wait by requestId,
    the whole copy's apart from the cut one's, once `count` waits are audited and both copies
    agree, or as they stand after 30 s. A cut copy is consumed a message at a time: its wait
    may show before its last event is read, so the first read of `count` waits is not the
    answer."""

    def split() -> dict[str, dict[str, Verdict]]:
        out: dict[str, dict[str, Verdict]] = {"whole": {}, "cut": {}}
        for w in httpx.get(f"{server.url}/v1/waits").json()["waits"]:
            rid, ev = w["requestId"], w["evidence"]
            out["whole" if rid.startswith("whole-") else "cut"][rid.replace("whole-", "")] = (
                w["state"],
                w["action"],
                ev["actionDigest"],
                w["uncertain"],
                ev["decision"],
                tuple(sorted(str(f).replace("whole-", "") for f in w["findings"])),
            )
        return out

    def agreed() -> dict[str, dict[str, Verdict]] | None:
        out = split()
        counted = sum(map(len, out.values())) >= count
        return out if counted and out["whole"] == out["cut"] else None

    found: dict[str, dict[str, Verdict]] | None = _wait_for(agreed, 30)
    return split() if found is None else found


@pytest.mark.parametrize("name", WAITS)
def test_a_line_a_body_over_http_gives_the_whole_stream_verdicts(
    tmp_path: Path, db_url: str, name: str
) -> None:
    server = _start(tmp_path, db_url)
    try:
        posted = [httpx.post(f"{server.url}/v1/events", content=whole(name), headers=NDJSON)]
        for line in named(capture(name)):
            posted.append(httpx.post(f"{server.url}/v1/events", content=line, headers=NDJSON))
        found = verdicts(server, 2 * WAITS[name])
    finally:
        _stop(server)

    assert {200} == {p.status_code for p in posted}
    assert [] == [r for p in posted for r in p.json()["rejected"]]
    assert found["whole"]
    assert found["whole"] == found["cut"]


@pytest.mark.parametrize("name", WAITS)
def test_an_event_a_message_over_jetstream_gives_the_whole_stream_verdicts(
    tmp_path: Path,
    stream: Stream,  # noqa: F811 (the fixture)
    db_url: str,
    name: str,
) -> None:
    _publish(stream, whole(name), *named(capture(name)))
    server = _start_nats(tmp_path, stream, db_url)
    try:
        found = verdicts(server, 2 * WAITS[name])
    finally:
        _stop(server)

    assert found["whole"]
    assert found["whole"] == found["cut"]
