"""daemon/protocol.py subclasses uvicorn's private H11Protocol: the installed uvicorn must be
one of the releases pyproject.toml allows, and have every method and attribute the module
relies on. Each failure names what is missing, rather than a slow client held for ever."""

from __future__ import annotations

import asyncio
import inspect
import re
import socket
import tomllib
from pathlib import Path

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle
from uvicorn.server import ServerState

from sidewatch.daemon import protocol
from sidewatch.daemon.protocol import head_deadline

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def test_the_installed_uvicorn_is_within_the_range_pyproject_allows() -> None:
    deps = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    (spec,) = [d for d in deps if re.match(r"uvicorn\b", d)]
    lower = re.search(r">=\s*([\d.]+)", spec)
    upper = re.search(r"<\s*([\d.]+)", spec)
    assert lower is not None and upper is not None, f"{spec!r}: give uvicorn both bounds"
    installed = _version(uvicorn.__version__)

    assert _version(lower[1]) <= installed < _version(upper[1]), (
        f"uvicorn {uvicorn.__version__} is outside {spec!r}: check daemon/protocol.py against "
        "it (tests/daemon/test_slow_clients.py), then move the bound"
    )


def test_h11protocol_has_every_method_the_protocol_overrides() -> None:
    missing = [
        name
        for name in protocol.OVERRIDES
        if not inspect.isfunction(getattr(H11Protocol, name, None))
    ]

    assert [] == missing, f"uvicorn {uvicorn.__version__}'s H11Protocol lacks {missing}"


def test_a_connection_has_every_attribute_the_protocol_reads() -> None:
    async def app(scope: object, receive: object, send: object) -> None:
        raise AssertionError("no request is sent")

    async def connect() -> list[str]:
        loop = asyncio.get_running_loop()
        config = uvicorn.Config(app, log_config=None, lifespan="off")
        proto = head_deadline(30.0, 10)(config, ServerState(), {}, _loop=loop)
        ours, theirs = socket.socketpair()
        try:
            transport, _ = await loop.connect_accepted_socket(lambda: proto, ours)
            missing = [a for a in protocol.ATTRIBUTES if not hasattr(proto, a)]
            missing += [f"conn.{a}" for a in protocol.CONN_ATTRIBUTES if not hasattr(proto.conn, a)]
            transport.close()
            return missing
        finally:
            theirs.close()

    missing = asyncio.run(connect())

    assert [] == missing, f"uvicorn {uvicorn.__version__}'s H11Protocol lacks {missing}"


def test_a_request_cycle_has_every_attribute_the_protocol_reads() -> None:
    params = inspect.signature(RequestResponseCycle.__init__).parameters
    source = inspect.getsource(RequestResponseCycle)
    missing = [a for a in protocol.CYCLE_ATTRIBUTES if f"self.{a}" not in source]

    assert "on_response" in params
    assert [] == missing, f"uvicorn {uvicorn.__version__}'s RequestResponseCycle lacks {missing}"
