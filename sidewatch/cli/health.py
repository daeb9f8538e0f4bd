"""`sidewatch health`: ask the running daemon's `/readyz` (or `/healthz`) at its own listen
address, with its own TLS, read from the same config and environment as `serve`. A container's
HEALTHCHECK and a probe's `exec` use it: no shell, curl or hard-coded URL."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from sidewatch.cli.options import config_of, config_option, one_line_errors
from sidewatch.config import Config, listen_problem, split_listen

if TYPE_CHECKING:
    import http.client

# What a wildcard listen address is reached at from inside the same host (or container).
WILDCARD = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}  # noqa: S104 (a lookup, not a bind)


def target(cfg: Config) -> tuple[str, str, int]:
    """The scheme, host and port at which this config's daemon answers on this host."""
    host, port = split_listen(cfg.listen)
    return ("https" if cfg.tls_cert_file else "http"), WILDCARD.get(host, host), port


def probe(cfg: Config, path: str, timeout: float) -> tuple[int, str]:
    """The status and the first line of the body of GET `path` on the daemon of `cfg`."""
    import http.client  # only here: `--help` and the other commands never load ssl
    import ssl

    scheme, host, port = target(cfg)
    if scheme == "https":
        # The daemon's own certificate names the host people reach it by, not the address
        # this probe uses; nothing secret is sent (/readyz and /healthz take no token).
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            host, port, timeout=timeout, context=context
        )
    else:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", path, headers={"Accept": "application/json"})
        response = conn.getresponse()
        body = response.read(4096).decode("utf-8", "replace")
    finally:
        conn.close()
    return response.status, " ".join(body.split())[:300]


@click.command()
@config_option
@click.option(
    "--listen",
    default=None,
    metavar="HOST:PORT",
    help="The address `serve` was given with --listen (default: the config's, as serve).",
)
@click.option(
    "--live",
    is_flag=True,
    help="Ask /healthz (the process answers) instead of /readyz (it can do its work).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=3.0,
    show_default=True,
    help="Seconds to wait for the answer.",
)
@one_line_errors
def health(config_path: str | None, listen: str | None, live: bool, timeout: float) -> None:
    """Check the running daemon: exit 0 when its /readyz answers 200, 1 otherwise.

    It reads the same config file and environment as `serve` (SIDEWATCH_LISTEN,
    SIDEWATCH_TLS_CERT_FILE, ...) and asks the daemon at its own listen address (a wildcard
    address on loopback), over HTTPS when server.tls is set. For a container's HEALTHCHECK
    and a Kubernetes exec probe.
    """
    if listen is not None and (problem := listen_problem(listen)) is not None:
        raise click.BadParameter(f"{listen!r}: {problem}", param_hint="--listen")
    cfg = config_of(config_path, None)
    if listen is not None:
        from dataclasses import replace

        cfg = replace(cfg, listen=listen)
    import http.client

    path = "/healthz" if live else "/readyz"
    scheme, host, port = target(cfg)
    url = f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}{path}"
    try:
        status, body = probe(cfg, path, timeout)
    except (OSError, http.client.HTTPException) as e:
        click.echo(f"sidewatch: unhealthy: {url}: {' '.join(str(e).split()) or type(e).__name__}")
        sys.exit(1)
    if status != 200:
        click.echo(f"sidewatch: unhealthy: {url}: {status} {body}")
        sys.exit(1)
    click.echo(f"sidewatch: healthy: {url}: {status}")
