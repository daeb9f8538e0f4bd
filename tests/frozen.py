"""A TCP proxy that can stop forwarding, in both directions, without closing anything: to
the client, the server behind it hangs (a frozen network or a stopped server). Runs its own
event loop in a thread."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading


class FrozenProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self._flowing = threading.Event()
        self._flowing.set()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    def start(self) -> FrozenProxy:
        self._thread.start()
        self._ready.wait(10)
        return self

    def freeze(self) -> None:
        """Stop forwarding (what is sent is held, new connections are accepted and ignored)."""
        self._flowing.clear()

    def thaw(self) -> None:
        self._flowing.set()

    def close(self) -> None:
        self._flowing.set()
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for w in list(self._writers):
            w.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for w in list(self._writers):
            with contextlib.suppress(Exception):
                await w.wait_closed()
        if self._server is not None:
            await self._server.wait_closed()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._client, "127.0.0.1", self.port)
        )
        self._ready.set()
        self._loop.run_forever()

    async def _wait_flowing(self) -> None:
        while not self._flowing.is_set():
            await asyncio.sleep(0.05)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            await self._wait_flowing()
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._writers.add(up_writer)
        await asyncio.gather(
            self._pipe(reader, up_writer), self._pipe(up_reader, writer), return_exceptions=True
        )
        for w in (writer, up_writer):
            w.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            while data := await reader.read(65536):
                await self._wait_flowing()
                writer.write(data)
                await writer.drain()
        with contextlib.suppress(OSError, ConnectionError):
            writer.close()
