"""Headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`,
no extra package): open a page with or without a header, and read back its status, its DOM,
every console message, exception and log entry, and a screenshot."""

from __future__ import annotations

import base64
import contextlib
import os
import select
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
)


@dataclass
class Visit:
    status: int | None
    html: str
    console: list[str] = field(default_factory=list)  # messages, exceptions, log entries
    screenshot: bytes = b""
    value: Any = None  # what `evaluate` gave, as JSON


class Chromium:
    def __init__(self, profile: Path) -> None:
        binary = shutil.which("chromium") or "/usr/bin/chromium"
        if not Path(binary).is_file():
            pytest.fail("Debian's chromium is missing; `make test` installs it")
        to_child, self._send = os.pipe()
        self._recv, from_child = os.pipe()

        def fds() -> None:  # the protocol's fixed descriptors: 3 in, 4 out
            os.dup2(to_child, 3)
            os.dup2(from_child, 4)

        self.proc = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=fds,  # noqa: PLW1509 (only dup2 before exec)
            pass_fds=(3, 4),  # the child's numbers after `fds`: kept open through exec
        )
        os.close(to_child)
        os.close(from_child)
        self._buffer = b""
        self._id = 0
        self.events: list[dict[str, Any]] = []

    def close(self) -> None:
        with contextlib.suppress(OSError, AssertionError):  # it may be gone already
            self.call("Browser.close")
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._send)
        os.close(self._recv)

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            assert left > 0, "Chromium did not answer in time"
            ready, _, _ = select.select([self._recv], [], [], left)
            if ready:
                chunk = os.read(self._recv, 1 << 20)
                assert chunk, "Chromium closed its pipe"
                self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        parsed: dict[str, Any] = orjson.loads(message)
        return parsed

    def call(
        self, method: str, session: str | None = None, seconds: float = 30, **params: Any
    ) -> dict[str, Any]:
        self._id += 1
        message: dict[str, Any] = {"id": self._id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._send, orjson.dumps(message) + b"\0")
        deadline = time.monotonic() + seconds
        while True:
            answer = self._read(deadline)
            if answer.get("id") == self._id:
                assert "error" not in answer, f"{method}: {answer['error']}"
                result: dict[str, Any] = answer.get("result", {})
                return result
            self.events.append(answer)

    def wait_for(self, method: str, session: str, seconds: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + seconds
        while True:
            for event in self.events:
                if event.get("method") == method and event.get("sessionId") == session:
                    self.events.remove(event)
                    return event
            self.events.append(self._read(deadline))

    def visit(
        self,
        url: str,
        headers: dict[str, str] | None = None,
        screenshot: bool = False,
        width: int = 1280,
        evaluate: str | None = None,
    ) -> Visit:
        """Open `url` in a fresh tab `width` pixels wide (sending `headers` with every request
        of it); with `screenshot`, the whole page as PNG; with `evaluate`, that expression's
        value in the loaded page."""
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Network", "Runtime", "Log"):
            self.call(f"{domain}.enable", session)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            session,
            width=width,
            height=800,
            deviceScaleFactor=1,
            mobile=False,
        )
        if headers:
            self.call("Network.setExtraHTTPHeaders", session, headers=headers)
        self.events.clear()
        self.call("Page.navigate", session, url=url)
        self.wait_for("Page.loadEventFired", session)
        self.call("Runtime.evaluate", session, expression="0")  # let pending events arrive
        status = None
        console = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if event.get("sessionId") != session:
                continue
            if method == "Network.responseReceived" and params.get("type") == "Document":
                status = params["response"]["status"]
            elif method == "Runtime.consoleAPICalled":
                console.append(f"console.{params['type']}: {params.get('args')}")
            elif method == "Runtime.exceptionThrown":
                console.append(f"exception: {params['exceptionDetails'].get('text')}")
            elif method == "Log.entryAdded":
                entry = params["entry"]
                console.append(f"log {entry['level']} ({entry['source']}): {entry['text']}")
        root = self.call("DOM.getDocument", session)["root"]["nodeId"]
        html = self.call("DOM.getOuterHTML", session, nodeId=root)["outerHTML"]
        value = None
        if evaluate is not None:
            value = self.call("Runtime.evaluate", session, expression=evaluate, returnByValue=True)[
                "result"
            ].get("value")
        shot = b""
        if screenshot:
            data = self.call(
                "Page.captureScreenshot", session, format="png", captureBeyondViewport=True
            )["data"]
            shot = base64.b64decode(data)
        self.call("Target.closeTarget", targetId=target)
        return Visit(status, html, console, shot, value)
