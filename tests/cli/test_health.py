"""`sidewatch health` asks the running daemon at its own address, over its own TLS, read from
the same config and environment as `serve`; and `serve` starts from the environment alone (a
container's way: no mounted config)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from sidewatch.cli.main import cli
from sidewatch.config_schema import load_config
from sidewatch.errors import ConfigError
from tests.daemon.test_exposure import _self_signed
from tests.ports import free_port

SIDEWATCH = Path(sys.executable).with_name("sidewatch")
TOKENS = {
    "SIDEWATCH_INGEST_TOKEN": "ingest-token-0123456789",
    "SIDEWATCH_READ_TOKEN": "read-token-0123456789",
}


def test_the_environment_sets_the_servers_address_tls_and_exposure() -> None:
    env = {
        "SIDEWATCH_LISTEN": "0.0.0.0:9477",
        "SIDEWATCH_ALLOW_PLAINTEXT": "true",
        "SIDEWATCH_PROTECT_METRICS": "no",
        "SIDEWATCH_EXTERNAL_URL": "https://sidewatch.example/",
        **TOKENS,
    }

    cfg = load_config(None, env)

    assert ("0.0.0.0:9477", True, False) == (cfg.listen, cfg.allow_plaintext, cfg.protect_metrics)
    assert "https://sidewatch.example" == cfg.external_url
    assert ["ingest", "read"] == sorted(s for t in cfg.tokens for s in t.scopes)


def test_the_environment_overrides_the_files_server_keys_and_keeps_the_rest() -> None:
    data = {"server": {"listen": "127.0.0.1:1234", "tls": {"keyFile": "/k.pem"}}}
    env = {"SIDEWATCH_LISTEN": "127.0.0.1:4321", "SIDEWATCH_TLS_CERT_FILE": "/c.pem"}

    cfg = load_config(data, env)

    assert ("127.0.0.1:4321", "/c.pem", "/k.pem") == (
        cfg.listen,
        cfg.tls_cert_file,
        cfg.tls_key_file,
    )


def test_a_bad_value_from_the_environment_is_a_config_problem() -> None:
    with pytest.raises(ConfigError) as e:
        load_config(None, {"SIDEWATCH_ALLOW_PLAINTEXT": "maybe", "SIDEWATCH_LISTEN": "nowhere"})

    assert "server.listen" in str(e.value)
    assert "server.allowPlaintext: must be true or false" in str(e.value)


def test_beyond_loopback_without_tokens_serve_from_the_environment_refuses_in_one_line(
    tmp_path: Path,
) -> None:
    env = {"SIDEWATCH_LISTEN": f"0.0.0.0:{free_port()}", "SIDEWATCH_ALLOW_PLAINTEXT": "1"}

    done = subprocess.run(
        [str(SIDEWATCH), "serve"],
        cwd=tmp_path,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert 1 == done.returncode
    assert done.stderr.startswith(
        f"sidewatch: error: refusing to listen on {env['SIDEWATCH_LISTEN']}"
    )
    assert "SIDEWATCH_INGEST_TOKEN / SIDEWATCH_READ_TOKEN" in done.stderr


@contextmanager
def _serving(tmp_path: Path, env: Mapping[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    with (tmp_path / "serve.log").open("wb") as log:
        daemon = subprocess.Popen(
            [str(SIDEWATCH), "serve"], cwd=tmp_path, env={**os.environ, **env}, stderr=log
        )
        try:
            yield daemon
        finally:
            daemon.terminate()
            daemon.wait(timeout=30)


def _health(tmp_path: Path, env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SIDEWATCH), "health", *args],
        cwd=tmp_path,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def _until_healthy(tmp_path: Path, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    deadline = time.monotonic() + 30
    while True:
        done = _health(tmp_path, env)
        if done.returncode == 0 or time.monotonic() > deadline:
            return done
        time.sleep(0.2)


def test_a_daemon_started_from_the_environment_alone_is_healthy_at_its_wildcard_address(
    tmp_path: Path,
) -> None:
    port = free_port()
    env = {"SIDEWATCH_LISTEN": f"0.0.0.0:{port}", "SIDEWATCH_ALLOW_PLAINTEXT": "true", **TOKENS}

    with _serving(tmp_path, env):
        ready = _until_healthy(tmp_path, env)
        live = _health(tmp_path, env, "--live")

    assert (0, f"sidewatch: healthy: http://127.0.0.1:{port}/readyz: 200\n") == (
        ready.returncode,
        ready.stdout,
    )
    assert f"sidewatch: healthy: http://127.0.0.1:{port}/healthz: 200\n" == live.stdout


def test_health_speaks_tls_when_the_daemon_does(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    port = free_port()
    env = {
        "SIDEWATCH_LISTEN": f"127.0.0.1:{port}",
        "SIDEWATCH_TLS_CERT_FILE": str(cert),
        "SIDEWATCH_TLS_KEY_FILE": str(key),
    }

    with _serving(tmp_path, env):
        ready = _until_healthy(tmp_path, env)
        plain = _health(tmp_path, {"SIDEWATCH_LISTEN": f"127.0.0.1:{port}"})

    assert f"sidewatch: healthy: https://127.0.0.1:{port}/readyz: 200\n" == ready.stdout
    assert 1 == plain.returncode


def test_health_of_a_daemon_that_is_not_there_is_one_line_and_exit_1() -> None:
    port = free_port()

    result = CliRunner().invoke(cli, ["health", "--listen", f"127.0.0.1:{port}", "--timeout", "1"])

    assert 1 == result.exit_code
    assert result.output.startswith(f"sidewatch: unhealthy: http://127.0.0.1:{port}/readyz: ")
    assert 1 == len(result.output.splitlines())


def test_health_refuses_a_malformed_listen_address_as_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["health", "--listen", "nowhere"])

    assert 2 == result.exit_code
