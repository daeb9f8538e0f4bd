"""The daemon's logs: JSON lines with every `extra=` field, a level to choose, and an access
log only when asked for."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from sidewatch.daemon.logs import JsonLogs
from tests.ports import free_port as _free_port

ROOT = Path(__file__).resolve().parents[2]


def test_the_json_formatter_keeps_every_extra_field_cleaned() -> None:
    record = logging.LogRecord("sidewatch.jetstream", logging.INFO, "", 1, "batch", (), None)
    record.__dict__.update({"stream_seq": 42, "subject": "agui\nforged", "waits": 3})

    entry = json.loads(JsonLogs().format(record))

    assert (42, 3) == (entry["stream_seq"], entry["waits"])
    assert "\n" not in entry["subject"]
    assert entry["subject"].startswith("agui")


def _serve_once(tmp_path: Path, *flags: str) -> list[dict[str, object]]:
    """Starts the daemon with `flags`, asks /healthz once, stops it; its log records."""
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "sidewatch", "serve", "--db", f"sqlite:///{tmp_path}/s.db"]
    proc = subprocess.Popen(
        [*argv, "--listen", f"127.0.0.1:{port}", *flags],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5).read()
                break
            except OSError:
                assert time.monotonic() < deadline, "the daemon did not start"
                time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    return [json.loads(line) for line in err.splitlines() if line.startswith("{")]


def test_the_access_log_is_off_by_default_and_on_with_the_flag(tmp_path: Path) -> None:
    quiet = _serve_once(tmp_path)
    logged = _serve_once(tmp_path, "--access-log", "--log-level", "warning")

    assert [] == [r for r in quiet if r["logger"] == "uvicorn.access"]
    assert [] == [r for r in logged if r["level"] == "info" and r["logger"] != "uvicorn.access"]
    access = [r for r in logged if r["logger"] == "uvicorn.access"]
    assert 1 == len(access)
    assert "GET /healthz" in str(access[0]["msg"])
