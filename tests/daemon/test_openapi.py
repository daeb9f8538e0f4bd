"""schemathesis against the OpenAPI description of the HTTP API: every answer conforms to it
(status, content type, response schema) and none is a server error.

The ingest body is free text (NDJSON or SSE) that no JSON Schema describes exactly, so the two
checks that judge a schema's precision for request bodies (accepting what it allows, refusing
what it does not) are left out; the fuzz tests of tests/ingest cover those bodies.

The server runs on SQLite and on PostgreSQL, one store for all the examples of an operation."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from dataclasses import replace

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from sidewatch.config import Config
from sidewatch.daemon.openapi import OPENAPI
from sidewatch.daemon.serve import Daemon

# NDJSON bodies: lines of small JSON objects, some shaped like AG-UI events.
_EVENT = st.fixed_dictionaries(
    {"type": st.sampled_from(["RUN_STARTED", "RUN_FINISHED", "CUSTOM", "TOOL_CALL_START", "X"])},
    optional={
        "threadId": st.text(max_size=8),
        "runId": st.text(max_size=8),
        "name": st.sampled_from(["sidewatch.route", "sidewatch.heartbeat", "other"]),
        "value": st.dictionaries(
            st.text(max_size=6), st.integers() | st.text(max_size=6), max_size=3
        ),
    },
)
schemathesis.openapi.media_type(
    "application/x-ndjson",
    st.lists(_EVENT, min_size=1, max_size=6).map(
        lambda lines: "\n".join(json.dumps(x) for x in lines).encode()
    ),
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    schema = schemathesis.openapi.from_dict(OPENAPI)


@pytest.fixture
def daemon(db_url: str) -> Iterator[Daemon]:
    made = Daemon(
        replace(Config(), db_url=db_url, max_body_bytes=65_536, allowed_hosts=("testserver",))
    )
    yield made
    made.engine.dispose()


def test_the_server_serves_the_description_the_cases_come_from(daemon: Daemon) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Starlette's TestClient prefers httpx2 (see test_http)
        from starlette.testclient import TestClient  # noqa: PLC0415

    assert OPENAPI == TestClient(daemon.app).get("/openapi.json").json()


@schema.parametrize()
@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_the_api_conforms_to_its_description(case: schemathesis.Case, daemon: Daemon) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        case.call_and_validate(
            app=daemon.app,
            excluded_checks=[
                schemathesis.checks.positive_data_acceptance,
                schemathesis.checks.negative_data_rejection,
            ],
        )
