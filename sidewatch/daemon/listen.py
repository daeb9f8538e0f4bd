"""The address `serve` listens on: the refusals a config earns before anything starts (shared
with `check-config`), and the bound socket, so that a taken port is one line, not a traceback
after "serving on"."""

from __future__ import annotations

import socket
import ssl

from sidewatch.config import Config, is_loopback, split_listen
from sidewatch.errors import SidewatchError


def check_listen(config: Config) -> None:
    """Refuses a non-loopback address without tokens, or in plain HTTP unless allowed (the
    tokens would travel in clear), and TLS files that do not load."""
    host, _ = split_listen(config.listen)
    if not is_loopback(host) and not config.tokens:
        raise SidewatchError(
            f"refusing to listen on {config.listen} without tokens: configure server.tokens "
            "(or SIDEWATCH_INGEST_TOKEN / SIDEWATCH_READ_TOKEN), or listen on 127.0.0.1"
        )
    if not is_loopback(host) and config.tls_cert_file is None and not config.allow_plaintext:
        raise SidewatchError(
            f"refusing to listen on {config.listen} in plain HTTP, where tokens travel in "
            "clear: configure server.tls (certFile, keyFile), or terminate TLS in front of "
            "sidewatch and set server.allowPlaintext: true"
        )
    if config.tls_cert_file is not None:
        try:  # uvicorn loads them again; here a bad file is a one-line error before anything
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
                config.tls_cert_file, config.tls_key_file
            )
        except (OSError, ssl.SSLError) as e:
            raise SidewatchError(
                f"server.tls: cannot load the certificate {config.tls_cert_file} and key "
                f"{config.tls_key_file}: {getattr(e, 'strerror', None) or e}"
            ) from e


def bind(listen: str) -> socket.socket:
    """A socket bound to `listen` (HOST:PORT), for uvicorn to listen on; a taken port or an
    address not of this host is a SidewatchError."""
    host, port = split_listen(listen)
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as e:
        raise SidewatchError(f"cannot listen on {listen}: {e.strerror or e}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        sock.bind(address)
    except OSError as e:
        sock.close()
        raise SidewatchError(f"cannot listen on {listen}: {e.strerror or e}") from None
    sock.set_inheritable(True)
    return sock
