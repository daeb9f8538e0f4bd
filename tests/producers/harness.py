"""What the live producer tests share: running a capture script in its integration's own
interpreter, and the first run of a captured stream (the interrupt nobody answered yet)."""

from __future__ import annotations

import subprocess
from pathlib import Path

HERE = Path(__file__).parent


def capture(python: Path | str, script: str, out: Path, env: dict[str, str] | None = None) -> None:
    """Run `script` (beside this file) with `python` in its own process (the producer's own
    warning settings), writing its NDJSON files into `out`; `env` replaces the environment."""
    done = subprocess.run(
        [str(python), str(HERE / script), str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=env,
    )
    assert 0 == done.returncode, done.stderr[-2000:]


def first_run(body: bytes) -> bytes:
    """The lines up to and including the first RUN_FINISHED: the run that asked."""
    lines = body.splitlines()
    return b"\n".join(lines[: next(n for n, ln in enumerate(lines) if b'"RUN_FINISHED"' in ln) + 1])
