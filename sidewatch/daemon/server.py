"""The process around the daemon: uvicorn with SIGHUP and a bound on shutdown, and the
open-file limit that caps how many connections it holds."""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

import uvicorn

from sidewatch.config import Config

log = logging.getLogger("sidewatch")


# Open files the daemon needs besides its connections: store connections (three files each
# on SQLite), the listening sockets, the Alertmanager and NATS clients, reports, logs.
FILES_IN_RESERVE = 128


def raise_open_files() -> int:
    """Raises the soft limit on open files to the hard limit where allowed; returns the soft
    limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as e:
            log.warning("could not raise the open-file limit from %d: %s", soft, e)
    return soft


def connection_cap(config: Config, open_files: int) -> int:
    """server.maxConnections, lowered to what the open-file limit leaves for connections."""
    room = max(1, open_files - FILES_IN_RESERVE)
    if config.max_connections > room:
        log.warning(
            "server.maxConnections %d is over what the open-file limit of %d allows: "
            "holding at most %d connections (raise the limit: ulimit -n, LimitNOFILE=)",
            config.max_connections,
            open_files,
            room,
        )
        return room
    return config.max_connections


class BoundedServer(uvicorn.Server):
    """uvicorn that calls `on_hup` on the event loop at SIGHUP (the config's reload), and
    exits within `bound_s` of the first SIGTERM or SIGINT whatever still runs (a store that
    stopped answering holds worker threads)."""

    def __init__(
        self, bound_s: float, config: uvicorn.Config, on_hup: Callable[[], None] = lambda: None
    ) -> None:
        super().__init__(config)
        self.bound_s = bound_s
        self.on_hup = on_hup
        self._bound: threading.Timer | None = None

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            with super().capture_signals():
                yield
            return
        loop = asyncio.get_running_loop()

        def hup(sig: int, frame: FrameType | None) -> None:
            loop.call_soon_threadsafe(self.on_hup)

        before = signal.signal(signal.SIGHUP, hup)
        try:
            with super().capture_signals():
                yield
        finally:
            signal.signal(signal.SIGHUP, before)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        if self._bound is None:
            self._bound = threading.Timer(self.bound_s, self._give_up)
            self._bound.daemon = True
            self._bound.start()

    def _give_up(self) -> None:
        log.error(
            "shutdown took longer than %gs (server.shutdownTimeout): exiting now", self.bound_s
        )
        for handler in logging.getLogger().handlers:
            handler.flush()
        os._exit(1)
