"""The ingest endpoint under hostile bodies: never a 5xx, and it keeps serving (on SQLite and
on PostgreSQL; every example of a run shares one store)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidewatch.config import Config
from sidewatch.daemon.serve import Daemon

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette's TestClient prefers httpx2 (see test_http)
    from starlette.testclient import TestClient

MEDIA = [
    None,
    "application/x-ndjson",
    "application/json",
    "text/event-stream",
    "text/plain",
    "application/xml",
    "multipart/form-data; boundary=x",
]


@pytest.fixture
def client(db_url: str) -> Iterator[TestClient]:
    daemon = Daemon(
        replace(Config(), db_url=db_url, max_body_bytes=65_536, allowed_hosts=("testserver",))
    )
    yield TestClient(daemon.app)
    daemon.engine.dispose()


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    body=st.binary(max_size=2000),
    media=st.sampled_from(MEDIA),
    encoding=st.sampled_from([None, "gzip", "identity", "br"]),
)
def test_no_body_gets_a_server_error(
    client: TestClient, body: bytes, media: str | None, encoding: str | None
) -> None:
    headers = {}
    if media:
        headers["content-type"] = media
    if encoding:
        headers["content-encoding"] = encoding

    answer = client.post("/v1/events", content=body, headers=headers)

    assert answer.status_code in (200, 400, 413, 415), answer.text
    assert 200 == client.get("/healthz").status_code
