"""`make ui-screenshots`: the wait pages of the reference audit (shifted to now) and its HTML
report, served by a real `sidewatch serve` and shot in headless Chromium, for the README and
the docs (docs/images).

    python -m tests.daemon.ui_screenshots docs/images
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import httpx

from sidewatch.core.text import wait_page_url
from tests.daemon.chromium import Chromium
from tests.daemon.test_e2e import _audited, _seed_relative_to_now, _start, _stop, _wait_for

SHOTS = {
    "ui-waits.png": "/ui/waits",
    "ui-wait.png": wait_page_url("", "thread-deploy/int-deploy"),
    "ui-report.png": "/ui/report",
}


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        db, reports = f"sqlite:///{Path(tmp) / 'example.db'}", Path(tmp) / "reports"
        server = _start(Path(tmp), db, extra=f"reports: {{directory: '{reports}'}}\n")
        browser = Chromium(Path(tmp) / "profile")
        try:
            body, _ = _seed_relative_to_now()
            headers = {"content-type": "application/x-ndjson"}
            httpx.post(f"{server.url}/v1/events", content=body, headers=headers).raise_for_status()
            if not _wait_for(lambda: _audited(server, 6)):
                raise SystemExit("the daemon never audited the reference stream")
            # the report /ui/report serves: the last day's, written as the nightly job would
            reports.mkdir()
            report = [sys.executable, "-m", "sidewatch", "report", "--db", db, "--window", "24h"]
            subprocess.run([*report, "--format", "html", "--output", str(reports)], check=True)
            for name, path in SHOTS.items():
                visit = browser.visit(server.url + path, screenshot=True)
                if visit.status != 200 or visit.console:
                    raise SystemExit(f"{path}: status {visit.status}, console {visit.console}")
                (out / name).write_bytes(visit.screenshot)
                sys.stdout.write(f"{out / name}: {len(visit.screenshot):,} bytes\n")
        finally:
            browser.close()
            _stop(server)


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/images"))
