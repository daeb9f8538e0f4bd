"""The OpenAPI 3 description of the HTTP API, served at `/openapi.json` (and what schemathesis
checks the server against)."""

from __future__ import annotations

from typing import Any

from sidewatch import __version__
from sidewatch.core.model import State

_ERROR = {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_ERRORS = {
    "400": _json(_ERROR, "a query or body that cannot be read, or whose data the store refused"),
    "401": _json(_ERROR, "no token, or an unknown one"),
    "403": _json(
        _ERROR,
        "a token without the scope; or a request from another site's web page (Origin, "
        "Sec-Fetch-Site), or without tokens for a Host that is not this server's",
    ),
    "503": _json(_ERROR, "the store is unavailable; nothing was stored, safe to retry"),
}
_WAIT: dict[str, Any] = {
    "type": "object",
    "required": ["requestId", "state", "closed", "nextMove", "since", "thresholds", "evidence"],
    "properties": {
        "requestId": {"type": "string"},
        "state": {"type": "string", "enum": [s.value for s in State]},
        "closed": {"type": "boolean"},
        "nextMove": {"type": "string"},
        "since": {"type": "string"},
        "thresholds": {"type": "object"},
        "evidence": {"type": "object"},
    },
}
_BODY = {"type": "string"}

OPENAPI: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {
        "title": "sidewatch",
        "version": __version__,
        "description": "Approval-wait health: ingest AG-UI traffic, read verdicts.",
    },
    "paths": {
        "/v1/events": {
            "post": {
                "summary": "Ingest one unit: NDJSON, JSON, or AG-UI SSE text (gzip allowed)",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/x-ndjson": {"schema": _BODY},
                        "text/event-stream": {"schema": _BODY},
                        "application/json": {"schema": {}},
                    },
                },
                "responses": {
                    "200": _json(
                        {
                            "type": "object",
                            "required": ["accepted", "skipped", "rejected"],
                            "properties": {
                                "accepted": {"type": "integer"},
                                "skipped": {"type": "integer"},
                                "rejected": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "required": ["line", "error"],
                                        "properties": {
                                            "line": {"type": "integer"},
                                            "error": {"type": "string"},
                                        },
                                    },
                                },
                            },
                        },
                        "stored (every accepted line is durably committed; a line of a kind "
                        "the token's `kinds` leave out is among `rejected`)",
                    ),
                    "408": _json(
                        _ERROR,
                        "the body did not arrive within server.requestTimeout; nothing stored",
                    ),
                    "413": _json(_ERROR, "over a size limit"),
                    "415": _json(_ERROR, "an unsupported media type or encoding"),
                    **_ERRORS,
                },
            }
        },
        "/v1/waits": {
            "get": {
                "summary": "Verdicts evaluated now",
                "parameters": [
                    {
                        "name": "state",
                        "in": "query",
                        "description": "only the waits in this state",
                        "schema": {"type": "string", "enum": [s.value for s in State]},
                    },
                    {
                        "name": "open",
                        "in": "query",
                        "description": "only the open waits (true) or the closed ones (false)",
                        "schema": {"type": "string", "enum": ["true", "false"]},
                    },
                    {
                        "name": "limit",
                        "in": "query",
                        "description": "how many waits a page holds (default 100)",
                        "schema": {"type": "integer", "minimum": 1, "maximum": 10000},
                    },
                    {
                        "name": "cursor",
                        "in": "query",
                        "description": "the `next` of the page before, as it is (opaque)",
                        "schema": {"type": "string"},
                    },
                ],
                "responses": {
                    "200": _json(
                        {
                            "type": "object",
                            "required": ["evaluatedAt", "total", "next", "waits"],
                            "properties": {
                                "evaluatedAt": {"type": "string"},
                                "total": {
                                    "type": "integer",
                                    "minimum": 0,
                                    "description": "how many waits match, on every page",
                                },
                                "next": {
                                    "type": "string",
                                    "nullable": True,
                                    "description": "the cursor of the next page; null on the last",
                                },
                                "waits": {"type": "array", "items": _WAIT},
                            },
                        },
                        "a page of the waits, longest in their state first",
                    ),
                    **_ERRORS,
                },
            }
        },
        "/v1/waits/{requestId}": {
            "get": {
                "summary": "One wait: its verdict now, evidence timeline and transitions",
                "parameters": [
                    {
                        "name": "requestId",
                        "in": "path",
                        "required": True,
                        "description": "the wait's requestId, as a verdict gives it",
                        "schema": {"type": "string"},
                    }
                ],
                "responses": {
                    "200": _json(
                        {
                            **_WAIT,
                            "properties": {
                                **_WAIT["properties"],
                                "timeline": {"type": "array"},
                                "transitions": {"type": "array"},
                            },
                        },
                        "the wait",
                    ),
                    "404": _json(_ERROR, "no such wait"),
                    **_ERRORS,
                },
            }
        },
        "/healthz": {
            "get": {"summary": "Liveness", "responses": {"200": _json({"type": "object"}, "alive")}}
        },
        "/readyz": {
            "get": {
                "summary": "Readiness",
                "responses": {
                    "200": _json({"type": "object"}, "ready"),
                    "503": _json({"type": "object"}, "not ready, and why"),
                },
            }
        },
        "/metrics": {
            "get": {
                "summary": "Prometheus exposition",
                "responses": {
                    "200": {
                        "description": "metrics",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    },
                    "401": _json(_ERROR, "protected, and no token"),
                    "403": _json(_ERROR, "a token without the read scope"),
                },
            }
        },
    },
}
