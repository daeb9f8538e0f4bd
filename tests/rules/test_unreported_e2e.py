"""AG-UI traffic only, by file ingest: the metrics a tick exports for it are what the rules
read, so that a wait UNROUTABLE on route evidence nobody reported is only the operator's
ticket naming `route`, and a wait whose delivery was reported failing pages its owner.

The exported samples are fed to `promtool test rules` as input series, and the rules'
own alert expressions are evaluated over them."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import yaml
from click.testing import CliRunner
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from sidewatch.app.audit import Auditor
from sidewatch.cli.main import cli
from sidewatch.config import Config
from sidewatch.exporters.prometheus import SnapshotCollector
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store
from tests.rules.test_rules import RULES, alerts, promtool

CAPTURE = Path(__file__).resolve().parents[1] / "ingest" / "producers" / "fixtures"
THREAD = "thread-lg-approve-resume"
READ = ("sidewatch_waits", "sidewatch_waits_unreported")
SCRAPED = frozenset({("job", "sidewatch")})  # the target label of the rules' default selector


def interrupted_run(thread: str) -> list[str]:
    """ag-ui-langgraph's capture up to the run that stops on the interrupt, for `thread`."""
    lines = (CAPTURE / "langgraph-approve-resume10.ndjson").read_text().splitlines()
    end = next(k for k, line in enumerate(lines) if '"outcome": {"type": "interrupt"' in line or
               '"outcome":{"type":"interrupt"' in line)  # fmt: skip
    return [line.replace(THREAD, thread) for line in lines[: end + 1]]


def interrupt_id(lines: list[str]) -> str:
    return str(json.loads(lines[-1])["outcome"]["interrupts"][0]["id"])


def exported(db: str, at_ms: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    engine = open_store(db)
    try:
        auditor = Auditor(Store(engine), Config().policies)
        auditor.tick(at_ms)
        registry = CollectorRegistry()
        registry.register(SnapshotCollector(lambda: auditor.snapshot, auditor.ingest))
        text = generate_latest(registry).decode()
    finally:
        engine.dispose()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name in READ
    }


def series(name: str, labels: frozenset[tuple[str, str]]) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels))
    return f"{name}{{{inner}}}"


def test_file_ingest_of_ag_ui_only_traffic_exports_what_the_rules_need(
    db_url: str, tmp_path: Path
) -> None:
    unreported = interrupted_run("thread-unrouted")
    failing = interrupted_run("thread-failed")
    route = {
        "type": "CUSTOM",
        "name": "sidewatch.route",
        "value": {
            "threadId": "thread-failed",
            "interruptId": interrupt_id(failing),
            "channel": "slack",
            "delivered": False,
            "error": "channel_not_found",
        },
    }
    (tmp_path / "agui.ndjson").write_text("\n".join([*unreported, *failing]) + "\n")
    (tmp_path / "notifier.ndjson").write_text(json.dumps(route) + "\n")
    done = CliRunner().invoke(
        cli,
        [
            "ingest",
            "--db",
            db_url,
            str(tmp_path / "agui.ndjson"),
            str(tmp_path / "notifier.ndjson"),
        ],
    )
    assert 0 == done.exit_code, done.output

    # past routeGrace (2 min), within heartbeatFreshness (10 min)
    samples = exported(db_url, int(time.time() * 1000) + 3 * 60_000)

    unroutable = frozenset({("state", "UNROUTABLE"), ("policy", "default")})
    assert 2 == samples[("sidewatch_waits", unroutable)]
    assert 1 == samples[("sidewatch_waits_unreported", unroutable | {("missing", "route")})]
    exprs = {r["alert"]: " ".join(str(r["expr"]).split()) for r in alerts()}
    tests = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [  # as scraped: the job the rules select added
                    {"series": series(name, labels | SCRAPED), "values": f"{value:g}x5"}
                    for (name, labels), value in sorted(samples.items(), key=str)
                ],
                "promql_expr_test": [
                    {  # the owner is paged for the failed delivery only
                        "expr": exprs["SidewatchUnroutable"],
                        "eval_time": "1m",
                        "exp_samples": [{"labels": '{policy="default"}', "value": 1}],
                    },
                    {
                        "expr": exprs["SidewatchOrphaned"],
                        "eval_time": "1m",
                        "exp_samples": [],
                    },
                    {  # one ticket to the operator, naming the evidence nobody reports
                        "expr": exprs["SidewatchEvidenceUnreported"],
                        "eval_time": "1m",
                        "exp_samples": [
                            {"labels": '{missing="route", policy="default"}', "value": 1}
                        ],
                    },
                ],
            }
        ],
    }
    (tmp_path / "e2e_test.yml").write_text(yaml.safe_dump(tests))

    run = subprocess.run(
        [promtool(), "test", "rules", str(tmp_path / "e2e_test.yml")],
        capture_output=True,
        text=True,
        check=False,
    )

    assert 0 == run.returncode, run.stdout + run.stderr
