"""schemathesis against the OpenAPI description of the HTTP API: every answer conforms to it
(status, content type, response schema) and none is a server error.

The ingest body is free text (NDJSON or SSE) that no JSON Schema describes exactly, so the two
checks that judge a schema's precision for request bodies (accepting what it allows, refusing
what it does not) are left out; the fuzz tests of tests/ingest cover those bodies."""

from __future__ import annotations

import json
import warnings
from dataclasses import replace
from pathlib import Path

import schemathesis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from sidewatch.config import Config
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

_DB = Path(__import__("tempfile").mkdtemp(prefix="sidewatch-openapi-")) / "s.db"
DAEMON = Daemon(replace(Config(), db_url=f"sqlite:///{_DB}", max_body_bytes=65_536))

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    schema = schemathesis.openapi.from_asgi("/openapi.json", DAEMON.app)


@schema.parametrize()
@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_the_api_conforms_to_its_description(case: schemathesis.Case) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        case.call_and_validate(
            excluded_checks=[
                schemathesis.checks.positive_data_acceptance,
                schemathesis.checks.negative_data_rejection,
            ]
        )
