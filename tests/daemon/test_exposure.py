"""The HTTP surface: which requests reach the API (Origin, Fetch metadata, Host), the
connection cap under a low open-file limit, proxy headers, TLS, and the addresses the daemon
refuses to listen on. Request rules through Starlette's TestClient; the rest against the
real daemon process and real sockets."""

from __future__ import annotations

import dataclasses
import datetime as dt
import ipaddress
import logging
import socket
import sqlite3
import ssl
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from click.testing import CliRunner
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from sqlalchemy import create_engine, text

from sidewatch.cli.main import cli
from sidewatch.config import Config, Token
from sidewatch.config_schema import load_config
from sidewatch.daemon.listen import check_listen
from sidewatch.daemon.logs import OncePer
from sidewatch.daemon.serve import Daemon
from sidewatch.errors import ConfigError, SidewatchError
from tests.daemon.test_e2e import _start, _stop, _unit

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette's TestClient prefers httpx2 (see test_http)
    from starlette.testclient import TestClient

LISTEN = "http://127.0.0.1:9477"  # the default listen address, as a client names it
LINE = b'{"type":"RUN_STARTED","threadId":"t-web","runId":"r"}\n'
TOKEN = Token("tool", "tool-secret-0123456789", frozenset({"read", "ingest"}))


@pytest.fixture
def make_client(db_url: str) -> Iterator[Callable[..., TestClient]]:
    """A TestClient of a daemon on this test's store with `Config` fields changed as given,
    reaching it by its listen address."""
    made: list[Daemon] = []

    def make(**changes: Any) -> TestClient:
        made.append(Daemon(dataclasses.replace(Config(), db_url=db_url, **changes)))
        return TestClient(made[-1].app, base_url=LISTEN)

    yield make
    for daemon in made:
        daemon.engine.dispose()


def _post(client: TestClient, **headers: str) -> httpx.Response:
    # A browser's "simple" request: text/plain needs no CORS preflight.
    return client.post(
        "/v1/events", content=LINE, headers={"content-type": "text/plain", **headers}
    )


# -- Origin and Fetch metadata -------------------------------------------------------------


@pytest.mark.parametrize(
    "origin",
    ["http://evil.example", "null", "http://127.0.0.1:8080", "http://127.0.0.1.evil.example:9477"],
    ids=["other-site", "opaque", "other-local-port", "look-alike"],
)
def test_a_cross_origin_post_is_403_and_stores_nothing(
    make_client: Callable[..., TestClient], db_url: str, origin: str
) -> None:
    refused = _post(make_client(), origin=origin)

    assert 403 == refused.status_code
    assert "another origin refused" in refused.json()["error"]
    assert origin not in refused.text  # a request's values are never echoed
    assert [] == _sources(db_url)


def test_a_tool_without_an_origin_is_served(
    make_client: Callable[..., TestClient], db_url: str
) -> None:
    answer = _post(make_client())

    assert (200, 1) == (answer.status_code, answer.json()["accepted"])
    assert ["http:testclient"] == _sources(db_url)


@pytest.mark.parametrize("site", ["cross-site", "same-site"])
def test_a_browser_read_from_another_site_is_403_by_its_fetch_metadata(
    make_client: Callable[..., TestClient], site: str
) -> None:
    client = make_client()

    refused = client.get("/v1/waits", headers={"sec-fetch-site": site})
    typed_in = client.get("/v1/waits", headers={"sec-fetch-site": "none"})

    assert (403, 200) == (refused.status_code, typed_in.status_code)


@pytest.mark.parametrize(
    "origin",
    ["http://127.0.0.1:9477", "http://localhost:9477", "http://[::1]:9477", "https://app.example"],
    ids=["listen-address", "localhost", "ipv6-loopback", "listed"],
)
def test_this_servers_own_origin_and_a_listed_origin_are_served(
    make_client: Callable[..., TestClient], origin: str
) -> None:
    client = make_client(allowed_origins=("https://app.example",))

    answer = _post(client, origin=origin, **{"sec-fetch-site": "cross-site"})

    assert 200 == answer.status_code


def test_a_foreign_origin_is_refused_with_tokens_too(
    make_client: Callable[..., TestClient],
) -> None:
    client = make_client(tokens=(TOKEN,))
    auth = {"authorization": f"Bearer {TOKEN.secret}"}

    refused = _post(client, origin="http://evil.example", **auth)
    served = _post(client, **auth)

    assert (403, 200) == (refused.status_code, served.status_code)


# -- Host (DNS rebinding) ------------------------------------------------------------------


@pytest.mark.parametrize(
    "host",
    [
        "evil.example:9477",
        "127.0.0.1:9999",
        "127.0.0.1",
        "localhost:1",
        "sw.example@127.0.0.1:9477",
    ],
    ids=["rebound-name", "other-port", "default-port", "localhost-other-port", "userinfo"],
)
def test_a_foreign_host_is_403_without_tokens(
    make_client: Callable[..., TestClient], host: str
) -> None:
    answer = make_client().get("/v1/waits", headers={"host": host})

    assert 403 == answer.status_code
    assert "DNS rebinding" in answer.json()["error"]


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1:9477", "localhost:9477", "LOCALHOST:9477", "[::1]:9477", "sw.example:443"],
)
def test_the_listen_address_loopback_names_and_listed_names_are_served(
    make_client: Callable[..., TestClient], host: str
) -> None:
    answer = make_client(allowed_hosts=("sw.example",)).get("/healthz", headers={"host": host})

    assert 200 == answer.status_code


def test_with_tokens_any_host_is_served(make_client: Callable[..., TestClient]) -> None:
    client = make_client(tokens=(TOKEN,))

    answer = client.get(
        "/v1/waits",
        headers={"host": "sidewatch.internal:9477", "authorization": f"Bearer {TOKEN.secret}"},
    )

    assert 200 == answer.status_code


# -- config --------------------------------------------------------------------------------


def test_the_surface_keys_are_read_and_normalised() -> None:
    cfg = load_config(
        {
            "server": {
                "allowedHosts": ["SW.Example", "[::1]"],
                "allowedOrigins": ["HTTPS://App.Example:8443"],
                "trustedProxies": ["10.0.0.1", "192.168.0.0/16"],
                "maxConnections": 50,
                "tls": {"certFile": "/c.pem", "keyFile": "/k.pem"},
                "allowPlaintext": True,
            }
        },
        {},
    )

    assert (
        ("sw.example", "::1"),
        ("https://app.example:8443",),
        ("10.0.0.1/32", "192.168.0.0/16"),
        50,
        ("/c.pem", "/k.pem"),
        True,
    ) == (
        cfg.allowed_hosts,
        cfg.allowed_origins,
        cfg.trusted_proxies,
        cfg.max_connections,
        (cfg.tls_cert_file, cfg.tls_key_file),
        cfg.allow_plaintext,
    )


def test_the_example_config_documents_the_surface_defaults() -> None:
    example = Path(__file__).resolve().parents[2] / "config.example.yaml"
    keys = ("allowed_hosts", "allowed_origins", "trusted_proxies", "max_connections")
    keys += ("tls_cert_file", "tls_key_file", "allow_plaintext", "protect_metrics")

    cfg = load_config(yaml.safe_load(example.read_text()), {})

    assert [getattr(Config(), k) for k in keys] == [getattr(cfg, k) for k in keys]


def test_every_surface_problem_is_reported_at_once() -> None:
    with pytest.raises(ConfigError) as e:
        load_config(
            {
                "server": {
                    "allowedHosts": ["a b"],
                    "allowedOrigins": ["app.example"],
                    "trustedProxies": ["10.0.0.0/33"],
                    "maxConnections": 0,
                    "tls": {"certFile": "/c.pem"},
                    "allowPlaintext": "yes",
                }
            },
            {},
        )

    assert [
        "server.maxConnections: must be a number of connections, at least 1",
        "server.allowedHosts: must be a list of host names such as sw.example",
        "server.allowedOrigins: must be a list of origins such as https://app.example",
        "server.trustedProxies: must be a list of addresses or CIDRs such as 10.0.0.0/8",
        "server.tls: needs both certFile and keyFile (paths to PEM files)",
        "server.allowPlaintext: must be true or false",
    ] == e.value.problems


@pytest.mark.parametrize(
    ("listen", "setting", "protected"),
    [
        ("127.0.0.1:9477", None, False),
        ("0.0.0.0:9477", None, True),
        ("[2001:db8::1]:9477", None, True),
        ("0.0.0.0:9477", False, False),
        ("127.0.0.1:9477", True, True),
    ],
    ids=["loopback", "any-address", "ipv6", "beyond-loopback-opened", "loopback-asked"],
)
def test_metrics_are_protected_by_default_beyond_loopback(
    listen: str, setting: bool | None, protected: bool
) -> None:
    assert protected == Config(listen=listen, protect_metrics=setting).metrics_protected


def test_metrics_need_the_read_scope_by_default_beyond_loopback(
    make_client: Callable[..., TestClient],
) -> None:
    client = make_client(listen="0.0.0.0:9477", tokens=(TOKEN,))

    anonymous = client.get("/metrics")
    reader = client.get("/metrics", headers={"authorization": f"Bearer {TOKEN.secret}"})

    assert (401, 200) == (anonymous.status_code, reader.status_code)


# -- where the daemon listens --------------------------------------------------------------


def test_refuses_a_public_address_in_plain_http_even_with_tokens(tmp_path: Path) -> None:
    # A store that cannot open: were the address not refused, serve would fail on it instead,
    # before it binds anything.
    store = f"sqlite:///{tmp_path}/no-such-directory/s.db"

    result = CliRunner().invoke(
        cli,
        ["serve", "--db", store, "--listen", "0.0.0.0:9477"],
        env={"SIDEWATCH_INGEST_TOKEN": "ingest-secret-0123456789"},
    )

    assert 1 == result.exit_code
    assert result.output.startswith(
        "sidewatch: error: refusing to listen on 0.0.0.0:9477 in plain HTTP"
    )


def test_plain_http_beyond_loopback_is_allowed_when_asked() -> None:
    tokens = (TOKEN,)

    check_listen(Config(listen="0.0.0.0:9477", tokens=tokens, allow_plaintext=True))
    with pytest.raises(SidewatchError, match="in plain HTTP"):
        check_listen(Config(listen="0.0.0.0:9477", tokens=tokens))


def test_a_tls_file_that_does_not_load_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "c.pem").write_text("not a certificate\n")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"server: {{tls: {{certFile: {tmp_path}/c.pem, keyFile: {tmp_path}/k.pem}}}}\n")

    result = CliRunner().invoke(
        cli, ["serve", "--config", str(cfg), "--db", f"sqlite:///{tmp_path}/s.db"]
    )

    assert 1 == result.exit_code
    assert result.output.startswith(
        f"sidewatch: error: server.tls: cannot load the certificate {tmp_path}/c.pem"
    )
    assert 1 == len(result.output.splitlines())


# -- the real daemon: TLS, proxy headers, connections --------------------------------------


def _self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sidewatch test")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


def test_the_daemon_serves_tls_with_the_configured_certificate(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    trust = ssl.create_default_context(cafile=str(cert))
    server = _start(
        tmp_path,
        f"sqlite:///{tmp_path}/s.db",
        server=f", tls: {{certFile: '{cert}', keyFile: '{key}'}}",
        tls=trust,
    )
    try:
        ingest = httpx.post(
            f"{server.url}/v1/events",
            content=_unit(1),
            headers={"content-type": "application/x-ndjson"},
            verify=trust,
        )
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            httpx.get(f"{server.url}/healthz")  # the system's roots do not vouch for it
        with pytest.raises(httpx.TransportError):  # plain HTTP gets no answer
            httpx.get(server.url.replace("https:", "http:") + "/healthz", timeout=5)
    finally:
        _stop(server)

    assert server.url.startswith("https://")
    assert 200 == ingest.status_code


def _sources(db_url: str) -> list[str]:
    engine = create_engine(db_url)
    with engine.connect() as conn:
        sources = [r[0] for r in conn.execute(text("SELECT source FROM unit ORDER BY id"))]
    engine.dispose()
    return sources


@pytest.mark.parametrize(
    ("trusted", "source"),
    [("", "http:127.0.0.1"), (", trustedProxies: ['127.0.0.1']", "http:203.0.113.9")],
    ids=["not-configured", "trusted-proxy"],
)
def test_x_forwarded_for_is_the_source_only_from_a_trusted_proxy(
    tmp_path: Path, trusted: str, source: str
) -> None:
    server = _start(tmp_path, f"sqlite:///{tmp_path}/s.db", server=trusted)
    try:
        answer = httpx.post(
            f"{server.url}/v1/events",
            content=_unit(1),
            headers={"content-type": "application/x-ndjson", "x-forwarded-for": "203.0.113.9"},
        )
    finally:
        _stop(server)

    assert 200 == answer.status_code
    assert [source] == _sources(server.db_url)


def _soft_open_files(pid: int) -> int:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    raise AssertionError("no open-file limit in /proc")


def test_the_open_file_limit_is_raised_to_the_hard_limit(tmp_path: Path) -> None:
    server = _start(
        tmp_path, f"sqlite:///{tmp_path}/s.db", launcher=["prlimit", "--nofile=256:4096", "--"]
    )
    try:
        soft = _soft_open_files(server.proc.pid)
    finally:
        _stop(server)

    assert 4096 == soft


def test_idle_sockets_past_the_open_file_limit_do_not_keep_healthz_and_ingest_out(
    tmp_path: Path,
) -> None:
    # The hard limit is the soft one: nothing to raise. 300 idle sockets would take every
    # file the daemon may open; the cap keeps them to what the limit leaves.
    server = _start(
        tmp_path,
        f"sqlite:///{tmp_path}/s.db",
        server=", requestTimeout: 60s",  # far longer than the test: only the cap can help
        launcher=["prlimit", "--nofile=256:256", "--"],
    )
    port = int(server.url.rsplit(":", 1)[1])
    idle = []
    try:
        for _ in range(300):
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        time.sleep(2)  # the daemon accepts them all (and runs out of files, uncapped)
        started = time.monotonic()
        health = httpx.get(f"{server.url}/healthz", timeout=10)
        ingest = httpx.post(
            f"{server.url}/v1/events",
            content=_unit(1),
            headers={"content-type": "application/x-ndjson"},
            timeout=10,
        )
        seconds = time.monotonic() - started
    finally:
        for s in idle:
            s.close()
        _stop(server)

    log = server.log.read_text()
    assert (200, 200) == (health.status_code, ingest.status_code)
    assert seconds < 5
    assert "holding at most 128 connections" in log
    assert sum("out of system resource" in line for line in log.splitlines()) <= 1


def _closed_by_server(sock: socket.socket) -> bool:
    sock.settimeout(10)
    try:
        return b"" == sock.recv(1)
    except ConnectionResetError:
        return True


def test_past_the_cap_the_oldest_idle_or_trickling_connection_yields_and_busy_ones_do_not(
    tmp_path: Path,
) -> None:
    store = tmp_path / "s.db"
    server = _start(
        tmp_path,
        f"sqlite:///{store}",
        server=", maxConnections: 2, requestTimeout: 60s",
        store=", busyTimeout: 30s",
    )
    port = int(server.url.rsplit(":", 1)[1])
    body = _unit(1)
    head = (
        f"POST /v1/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/x-ndjson\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    opened: list[socket.socket] = []

    def connect() -> socket.socket:
        opened.append(socket.create_connection(("127.0.0.1", port)))
        time.sleep(0.3)  # accepted in this order
        return opened[-1]

    writer = sqlite3.connect(store, isolation_level=None)
    try:
        oldest, younger = connect(), connect()
        health = httpx.get(f"{server.url}/healthz", timeout=10)  # a third: the oldest yields
        oldest_closed = _closed_by_server(oldest)
        younger.sendall(head)  # its body still to come: it yields to the next as well
        connect().sendall(head)
        time.sleep(0.3)
        past_trickler = httpx.get(f"{server.url}/healthz", timeout=10)
        younger_closed = _closed_by_server(younger)
        # Two requests being answered: whole, their ingest waiting for the store's lock.
        writer.execute("BEGIN EXCLUSIVE")
        busy = connect()
        busy.sendall(head + body)
        connect().sendall(head + body)
        time.sleep(0.3)
        refused = httpx.get(f"{server.url}/healthz", timeout=10)
        busy.settimeout(0.5)
        with pytest.raises(TimeoutError):  # the busy connections were left alone
            busy.recv(1)
    finally:
        writer.close()
        for s in opened:
            s.close()
        _stop(server)

    assert 200 == health.status_code
    assert oldest_closed
    assert 200 == past_trickler.status_code
    assert younger_closed
    assert 503 == refused.status_code
    assert "too many connections" in refused.json()["error"]


def test_a_repeated_log_message_passes_once_per_interval_and_counts_the_rest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = logging.getLogger("tests.onceper")
    limit = OncePer(0.5)
    logger.addFilter(limit)
    caplog.set_level(logging.INFO, logger="tests.onceper")
    try:
        for n in range(1000):
            logger.error("socket.accept() out of system resource\nsocket: fd=%d", n)
        logger.error("another message")
        time.sleep(0.6)
        logger.error("socket.accept() out of system resource\nsocket: fd=%d", 1000)
    finally:
        logger.removeFilter(limit)

    assert [
        "socket.accept() out of system resource\nsocket: fd=0",
        "another message",
        "socket.accept() out of system resource\nsocket: fd=1000 (999 more like this held back)",
    ] == [r.getMessage() for r in caplog.records]


def test_the_daemons_logging_holds_back_a_flood_of_accept_errors() -> None:
    # In a process of its own: setup_logging takes over the root logger.
    flood = (
        "import logging\n"
        "from sidewatch.daemon.logs import setup_logging\n"
        "setup_logging()\n"
        "for n in range(10_000):\n"
        "    logging.getLogger('asyncio').error('socket.accept() out of system resource"
        "\\nsocket: fd=%d', n)\n"
    )

    err = subprocess.run(
        [sys.executable, "-c", flood], capture_output=True, text=True, check=True, timeout=60
    ).stderr

    assert 1 == len(err.splitlines())
    assert "out of system resource" in err
