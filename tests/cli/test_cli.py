"""The command line, through click's CliRunner: exact verdicts, exit codes, one-line errors."""

from __future__ import annotations

import gzip
import json
import socket
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import text

from sidewatch.app import ingest as app_ingest
from sidewatch.cli.main import cli
from sidewatch.errors import install_hint
from sidewatch.store.db import open_store

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
FIXTURE = SHARED / "fixtures" / "seed-audit.ndjson"
EXPECTED = json.loads((SHARED / "fixtures" / "seed-audit.expected.json").read_text())
AT = "2026-07-26T16:30:00Z"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


@pytest.fixture
def db(db_url: str) -> str:
    return db_url


def audit_json(db: str) -> dict:
    code, out = run("audit", "--db", db, "--at", AT, "--format", "json")
    assert code == 0, out
    return json.loads(out)


def test_reference_audit_gives_the_expected_verdict_for_every_request(db: str) -> None:
    run("ingest", "--db", db, str(FIXTURE))

    got = {f"{w['threadId']}/{w['interruptId']}": w["state"] for w in audit_json(db)["waits"]}

    assert EXPECTED["expected"] == got


SINCE = {
    # export: its requester's heartbeat was stale from 16:15 until the one at 16:28
    "thread-export/int-export": ("2026-07-26T16:28:00Z", "approver", "awaiting_decision"),
    "thread-delete/int-delete": ("2026-07-26T16:20:00Z", "requester", None),
    "thread-rotation/int-rotation": ("2026-07-26T16:10:30Z", "policy_owner", None),
    # invoice: no resume handle was ever reported, so orphaned once heartbeatFreshness passed
    "thread-invoice/int-invoice": ("2026-07-26T16:10:00Z", "runtime_owner", None),
    "thread-deploy/int-deploy": ("2026-07-26T16:25:00Z", "runtime_owner", None),
    "thread-message/int-message": ("2026-07-26T16:00:00Z", "requester", None),
}


def test_reference_audit_records_since_owner_phase_and_thresholds(db: str) -> None:
    run("ingest", "--db", db, str(FIXTURE))

    waits = audit_json(db)["waits"]

    assert SINCE == {w["requestId"]: (w["since"], w["owner"], w["phase"]) for w in waits}
    for w in waits:
        assert EXPECTED["policy"] == w["thresholds"]
        assert w["policy"] == "default"
        assert w["nextMove"]


def test_reference_audit_deploy_verdict_matches_the_interface_example(db: str) -> None:
    run("ingest", "--db", db, str(FIXTURE))

    deploy = next(w for w in audit_json(db)["waits"] if w["threadId"] == "thread-deploy")

    assert {
        "requestId": "thread-deploy/int-deploy",
        "runId": "run-deploy-1",
        "action": "deploy_service",
        "reason": "tool_call",
        "state": "STUCK_AFTER_DECISION",
        "closed": False,
        "owner": "runtime_owner",
        "uncertain": False,
        "missing": [],
    } == {
        k: deploy[k]
        for k in (
            "requestId",
            "runId",
            "action",
            "reason",
            "state",
            "closed",
            "owner",
            "uncertain",
            "missing",
        )
    }
    ev = deploy["evidence"]
    assert ("accept", "2026-07-26T16:20:00Z", None, False, "delivered", "role:release-owner") == (
        ev["decision"],
        ev["decidedAt"],
        ev["receiptAt"],
        ev["continuationFailed"],
        ev["route"],
        ev["approverRef"],
    )
    assert ev["actionDigest"].startswith("sha256:")


def test_ingesting_the_same_file_twice_changes_nothing(db: str) -> None:
    run("ingest", "--db", db, str(FIXTURE))
    first = audit_json(db)

    code, _ = run("ingest", "--db", db, str(FIXTURE))

    assert 0 == code
    assert first == audit_json(db)


def test_ingest_prints_a_summary_and_exits_1_with_line_numbered_rejects(
    db: str, tmp_path: Path
) -> None:
    unit = tmp_path / "unit.ndjson"
    unit.write_text(
        '{"type":"RUN_STARTED","threadId":"t","runId":"r"}\n'
        "not json at all\n"
        '{"type":"TOOL_CALL_RESULT","messageId":"m","toolCallId":"c","content":"x"}\n'
        '{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"hi"}\n'
        "[1, 2]\n"
    )

    code, out = run("ingest", "--db", db, str(unit))

    assert 1 == code
    lines = out.splitlines()
    assert f"{unit}: 2 accepted, 1 skipped, 2 rejected" == lines[0]
    assert lines[1].startswith(f"{unit}:2: not JSON")
    assert f"{unit}:5: not a JSON object but list" == lines[2]


def test_ingest_of_a_missing_file_is_a_one_line_error(db: str, tmp_path: Path) -> None:
    code, out = run("ingest", "--db", db, str(tmp_path / "nope.ndjson"))

    assert 1 == code
    assert out.startswith("sidewatch: error: ")
    assert "No such file" in out
    assert 1 == len(out.strip().splitlines())


def test_audit_with_an_unparsable_time_is_a_usage_error(db: str) -> None:
    code, out = run("audit", "--db", db, "--at", "yesterday-ish")

    assert 2 == code
    assert "is not an ISO 8601 time" in out


def test_a_report_window_starting_before_the_year_one_is_a_usage_error(db: str) -> None:
    code, out = run("report", "--db", db, "--at", "0001-01-01T12:00:00Z", "--format", "html")

    assert 2 == code
    assert "the window must start after the year 1" in out


def test_audit_open_lists_only_open_waits(db: str) -> None:
    run("ingest", "--db", db, str(FIXTURE))

    code, out = run("audit", "--db", db, "--at", AT, "--format", "json", "--open")

    assert 0 == code
    states = sorted(w["state"] for w in json.loads(out)["waits"])
    assert ["ORPHANED", "STALE", "STUCK_AFTER_DECISION", "UNROUTABLE", "WAITING"] == states


def test_audit_at_an_earlier_time_ignores_later_evidence(db: str) -> None:
    run("ingest", "--db", db, str(FIXTURE))

    code, out = run("audit", "--db", db, "--at", "2026-07-26T16:19:00Z", "--format", "json")

    deploy = next(w for w in json.loads(out)["waits"] if w["threadId"] == "thread-deploy")
    assert (0, "ORPHANED", None) == (code, deploy["state"], deploy["evidence"]["decision"])


def test_an_unusable_store_url_is_a_one_line_error() -> None:
    code, out = run("audit", "--db", "nosuchdriver://x")

    assert 1 == code
    assert out.startswith("sidewatch: error: store URL")


def test_demo_prints_the_six_request_audit_as_a_table() -> None:
    code, out = run("demo")

    assert 0 == code
    assert out.startswith("Audit at 2026-07-26T16:30:00Z: 6 wait(s), 5 open")
    for request, state in EXPECTED["expected"].items():
        assert any(line.startswith(request) and state in line for line in out.splitlines())
    assert "Next safe move:" in out


def test_the_demo_scenario_is_the_shared_reference_fixture() -> None:
    bundled = Path(__file__).resolve().parents[2] / "sidewatch" / "cli" / "seed-audit.ndjson"

    assert FIXTURE.read_bytes() == bundled.read_bytes()


def test_check_config_accepts_the_example() -> None:
    example = Path(__file__).resolve().parents[2] / "config.example.yaml"

    code, out = run("check-config", str(example))

    assert (0, True) == (code, out.startswith(f"{example}: ok (3 policies"))


def test_check_config_lists_every_problem_at_once(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("store: {url: nope}\npolicies:\n  - name: a\n    resumeGrace: soon\nbogus: 1\n")

    code, out = run("check-config", str(bad))

    assert 1 == code
    assert [
        f"sidewatch: error: {bad}: 3 problems:",
        "  - bogus: unknown key (known: alertmanager, auditor, nats, policies, privacy, reports,"
        " server, store, waits)",
        "  - store.url: must be a database URL such as sqlite:///./sidewatch.db",
        "  - policies[0] (a).resumeGrace: 'soon' is not a duration such as 30s, 5m or 1h",
    ] == out.splitlines()


def test_check_config_prints_the_schema_of_a_config_file() -> None:
    code, out = run("check-config", "--schema")

    assert (0, "https://json-schema.org/draft/2020-12/schema") == (code, json.loads(out)["$schema"])
    assert {"store", "server", "policies", "nats"} <= set(json.loads(out)["properties"])


@pytest.mark.parametrize("args", [(), ("--schema", "config.example.yaml")], ids=["none", "both"])
def test_check_config_wants_a_file_or_the_schema(args: tuple[str, ...]) -> None:
    code, out = run("check-config", *args)

    assert (2, "Error: give a config file to check, or --schema (not both)") == (
        code,
        out.splitlines()[-1],
    )


def test_help_teaches_the_first_commands() -> None:
    code, out = run("--help")

    assert 0 == code
    for word in ("sidewatch demo", "ingest", "audit", "check-config"):
        assert word in out


def test_ingest_reads_answers_by_the_configured_decision_labels(db: str, tmp_path: Path) -> None:
    config = tmp_path / "sidewatch.yaml"
    config.write_text("policies:\n  - name: crew\n    decisions: {decline: [hold_for_window]}\n")
    unit = tmp_path / "unit.ndjson"
    unit.write_text(
        '{"type":"RUN_STARTED","threadId":"t","runId":"r1","timestamp":1785080000000}\n'
        '{"type":"RUN_FINISHED","threadId":"t","runId":"r1","timestamp":1785080000001,'
        '"outcome":{"type":"interrupt","interrupts":[{"id":"i","reason":"tool_call"}]}}\n'
        '{"threadId":"t","runId":"r2","messages":[],"timestamp":1785080001000,'
        '"resume":[{"interruptId":"i","status":"resolved","payload":"hold_for_window"}]}\n'
        '{"type":"RUN_STARTED","threadId":"t","runId":"r2","timestamp":1785080001001}\n'
        '{"type":"RUN_FINISHED","threadId":"t","runId":"r2","timestamp":1785080001002}\n'
    )

    code, out = run("ingest", "--config", str(config), "--db", db, str(unit))

    assert 0 == code, out
    assert ["CLOSED_BY_DECLINE"] == [w["state"] for w in audit_json(db)["waits"]]


@pytest.mark.parametrize("command", ["audit", "report"])
def test_a_read_only_command_refuses_a_store_file_that_does_not_exist(
    command: str, tmp_path: Path
) -> None:
    typo = tmp_path / "typo.db"

    code, out = run(command, "--db", f"sqlite:///{typo}")

    assert (1, False) == (code, typo.exists())
    assert [
        f"sidewatch: error: store sqlite:///{typo} does not exist (nothing was created); "
        "`sidewatch ingest --db URL FILE` or `sidewatch db upgrade --db URL` creates one"
    ] == out.splitlines()


@pytest.mark.parametrize("command", ["audit", "report"])
def test_a_read_only_command_refuses_a_database_without_the_sidewatch_schema(
    command: str, blank_db_url: str, tmp_path: Path
) -> None:
    if blank_db_url.startswith("sqlite"):
        Path(blank_db_url.removeprefix("sqlite:///")).touch()  # an empty file, no tables

    code, out = run(command, "--db", blank_db_url)

    assert 1 == code
    assert 1 == len(out.splitlines())
    assert out.startswith("sidewatch: error: store ")
    assert "has no sidewatch schema; `sidewatch ingest --db URL FILE`" in out


def test_check_config_refuses_what_serve_would_refuse(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("server: {listen: '0.0.0.0:9477'}\n")  # beyond loopback without tokens

    code, out = run("check-config", str(bad))

    assert 1 == code
    assert [
        "sidewatch: error: refusing to listen on 0.0.0.0:9477 without tokens: configure "
        "server.tokens (or SIDEWATCH_INGEST_TOKEN / SIDEWATCH_READ_TOKEN), or listen on 127.0.0.1"
    ] == out.splitlines()


def test_check_config_never_prints_the_store_password(tmp_path: Path) -> None:
    cfg = tmp_path / "pg.yaml"
    cfg.write_text("store: {url: 'postgresql+psycopg://bob:hunter2@db.example/sw'}\n")

    code, out = run("check-config", str(cfg))

    assert 0 == code
    store = "postgresql+psycopg://bob:***@db.example/sw"
    assert f"{cfg}: ok (1 policies: default; store {store})\n" == out


def test_serve_on_a_port_in_use_is_one_line_before_anything_serves(db: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        listen = f"127.0.0.1:{taken.getsockname()[1]}"

        code, out = run("serve", "--db", db, "--listen", listen)

    assert 1 == code
    assert [f"sidewatch: error: cannot listen on {listen}: Address already in use"] == (
        out.splitlines()
    )


def test_serve_listen_with_a_port_out_of_range_is_a_usage_error() -> None:
    code, out = run("serve", "--listen", "127.0.0.1:99999")

    assert 2 == code
    assert (
        "Error: Invalid value for --listen: '127.0.0.1:99999': port 99999 is not between 1 "
        "and 65535" == out.splitlines()[-1]
    )


@pytest.mark.parametrize(
    ("window", "error"),
    [
        ("24", "'24' has no unit: say 24h, 24m or 24s"),
        ("0", "'0' is an empty window"),
        ("0s", "'0s' is an empty window"),
        (
            "99999999h",
            "the window must start after the year 1 (99999999h before 2026-07-26T16:30:00Z "
            "does not)",
        ),
    ],
    ids=["no-unit", "zero", "zero-seconds", "before-year-1"],
)
def test_a_report_window_that_means_nothing_useful_is_a_usage_error(
    db: str, window: str, error: str
) -> None:
    code, out = run("report", "--db", db, "--at", AT, "--window", window)

    assert 2 == code
    assert f"Error: Invalid value for --window: {error}" == out.splitlines()[-1]


def test_a_store_url_without_a_password_is_not_shown_with_one() -> None:
    code, out = run("audit", "--db", "postgres://user@localhost/db")

    assert 1 == code
    assert out.startswith("sidewatch: error: store URL 'postgres://user@localhost/db' is not")


def test_a_postgres_scheme_is_answered_with_the_one_to_write() -> None:
    code, out = run("audit", "--db", "postgres://user:secret@localhost/db")

    assert 1 == code
    assert [
        "sidewatch: error: store URL 'postgres://user:***@localhost/db' is not usable: Can't "
        "load plugin: sqlalchemy.dialects:postgres; for PostgreSQL write postgresql+psycopg://… "
        f"(with {install_hint('postgres')})"
    ] == out.splitlines()


def test_a_missing_postgresql_driver_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if the extra were not installed

    code, out = run("audit", "--db", "postgresql+psycopg://user:secret@localhost/db")

    assert 1 == code
    assert out.rstrip().endswith(f": {install_hint('postgres')}")
    assert "secret" not in out


def test_a_file_ingested_twice_is_counted_once_and_its_redelivery_apart(db: str) -> None:
    run("ingest", "--db", db, str(FIXTURE))
    run("ingest", "--db", db, str(FIXTURE))

    code, out = run("report", "--db", db, "--window", "24h", "--format", "json")

    assert 0 == code
    ingest = json.loads(out)["ingest"]
    assert (2, 50, 18, 1, 68) == (
        ingest["units"],
        ingest["acceptedLines"],
        ingest["skippedLines"],
        ingest["redeliveredUnits"],
        ingest["redeliveredLines"],
    )


def test_check_config_names_a_frontend_tool_pattern_that_is_no_glob(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text('waits:\n  frontendTools: ["confirm_*", "approve_["]\n')

    code, out = run("check-config", str(bad))

    assert (
        1,
        [
            f"sidewatch: error: {bad}: 1 problem:",
            "  - waits.frontendTools: 'approve_[' is not a glob pattern: a '[' in it is never"
            " closed",
        ],
    ) == (code, out.splitlines())


def test_ingest_reads_frontend_tool_waits_by_the_config(db: str, tmp_path: Path) -> None:
    """`sidewatch ingest --config` with `waits.frontendTools` makes pydantic-ai's pending
    frontend call a wait; without the config it is none."""
    producers = Path(__file__).resolve().parents[1] / "ingest" / "producers" / "fixtures"
    capture = producers / "pydantic-ai-frontend-tool.ndjson"
    config = tmp_path / "sidewatch.yaml"
    config.write_text('waits:\n  frontendTools: ["confirm_*"]\n')
    plain = tmp_path / "plain.db"

    ingested = [
        run("ingest", "--config", str(config), "--db", db, str(capture))[0],
        run("ingest", "--db", f"sqlite:///{plain}", str(capture))[0],
    ]

    got = json.loads(run("audit", "--db", db, "--format", "json")[1])["waits"]
    none = json.loads(run("audit", "--db", f"sqlite:///{plain}", "--format", "json")[1])["waits"]
    assert ([0, 0], [("call_confirm_1", "frontend_tool", "RESUMED")], []) == (
        ingested,
        [(w["interruptId"], w["reason"], w["state"]) for w in got],
        none,
    )


# -- a file is held to the limits of a request body -------------------------------------------


def _limits(tmp_path: Path, **server: int) -> str:
    config = tmp_path / "limits.yaml"
    config.write_text("server:\n" + "".join(f"  {k}: {v}\n" for k, v in server.items()))
    return str(config)


def _quiet_unit(tmp_path: Path) -> Path:
    """A file within every limit: a run that starts and finishes, holding no wait."""
    unit = tmp_path / "quiet.ndjson"
    unit.write_text(
        '{"type":"RUN_STARTED","threadId":"q","runId":"r","timestamp":1785080000000}\n'
        '{"type":"RUN_FINISHED","threadId":"q","runId":"r","timestamp":1785080000001}\n'
    )
    return unit


@pytest.mark.parametrize("gzipped", [False, True], ids=["ndjson", "gzip"])
def test_a_file_over_the_line_limit_is_stored_in_units_with_the_verdicts_of_one(
    db: str, tmp_path: Path, gzipped: bool
) -> None:
    big = tmp_path / ("seed.ndjson.gz" if gzipped else "seed.ndjson")
    big.write_bytes(gzip.compress(FIXTURE.read_bytes()) if gzipped else FIXTURE.read_bytes())

    code, out = run(
        "ingest", "--config", _limits(tmp_path, maxLinesPerUnit=10), "--db", db, str(big)
    )

    assert (0, f"{big}: 50 accepted, 18 skipped, 0 rejected\n") == (code, out)
    got = {f"{w['threadId']}/{w['interruptId']}": w["state"] for w in audit_json(db)["waits"]}
    assert EXPECTED["expected"] == got
    engine = open_store(db)
    with engine.connect() as conn:
        units = conn.execute(text("SELECT count(*) FROM unit")).scalar_one()
    engine.dispose()
    assert 6 == units  # 69 lines: a unit ends at the first run's end past its 10th line


@pytest.mark.parametrize("ending", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_standard_input_of_exactly_the_line_limit_is_taken_one_line_more_refused(
    db: str, tmp_path: Path, ending: str
) -> None:
    """Issue 33: a unit of exactly `maxLinesPerUnit` lines (what `split -l` gives) is taken."""
    lines = _quiet_unit(tmp_path).read_text().splitlines()
    limits = _limits(tmp_path, maxLinesPerUnit=2)

    taken = CliRunner().invoke(
        cli, ["ingest", "--config", limits, "--db", db, "-"], input=ending.join(lines) + ending
    )
    refused = CliRunner().invoke(
        cli,
        ["ingest", "--config", limits, "--db", db, "-"],
        input=ending.join([*lines, lines[0]]) + ending,
    )

    assert (0, "-: 2 accepted, 0 skipped, 0 rejected\n") == (taken.exit_code, taken.output)
    assert 1 == refused.exit_code
    assert "3 lines, over the limit of 2 a unit" in refused.output


def test_a_file_read_whole_over_the_line_limit_is_refused_and_the_next_file_goes_on(
    db: str, tmp_path: Path
) -> None:
    big = tmp_path / "seed.json"
    big.write_bytes(b"[" + b",".join(FIXTURE.read_bytes().splitlines()) + b"]")
    quiet = _quiet_unit(tmp_path)

    code, out = run(
        "ingest",
        "--config",
        _limits(tmp_path, maxLinesPerUnit=10),
        "--db",
        db,
        str(big),
        str(quiet),
    )

    assert 1 == code
    assert [
        f"sidewatch: error: {big}: 68 lines, over the limit of 10 a unit: split the body; "
        "nothing of it was stored",
        f"{quiet}: 2 accepted, 0 skipped, 0 rejected",
    ] == out.splitlines()
    assert [] == audit_json(db)["waits"]


def test_a_gzip_file_read_whole_inflating_past_the_limit_is_refused_whole(
    db: str, tmp_path: Path
) -> None:
    bomb = tmp_path / "seed.json.gz"
    bomb.write_bytes(gzip.compress(b"[" + b",".join(FIXTURE.read_bytes().splitlines()) + b"]"))

    code, out = run(
        "ingest", "--config", _limits(tmp_path, maxInflatedBytes=4096), "--db", db, str(bomb)
    )

    assert 1 == code
    assert [
        f"sidewatch: error: {bomb}: body inflates past the limit of 4096 bytes; "
        "nothing of it was stored"
    ] == out.splitlines()


def test_a_line_over_the_line_length_limit_is_rejected_as_over_http(
    db: str, tmp_path: Path
) -> None:
    line = (
        '{"type":"RUN_STARTED","threadId":"q","runId":"r","timestamp":1785080000000,'
        f'"input":{{"x":"{"y" * 2000}"}}}}'
    )
    unit = tmp_path / "long.ndjson"
    unit.write_text(f"{line}\n")

    code, out = run(
        "ingest", "--config", _limits(tmp_path, maxLineBytes=1024), "--db", db, str(unit)
    )

    assert 1 == code
    assert f"{unit}: 0 accepted, 0 skipped, 1 rejected" == out.splitlines()[0]
    assert out.splitlines()[1].startswith(
        f"{unit}:1: line of {len(line)} bytes, over the limit of 1024"
    )


def test_a_file_s_rejects_past_the_kept_ones_are_counted_and_stored_not_held(
    db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A streamed file of any number of bad lines is read in bounded memory: its summary holds
    its first FILE_REJECTS_KEPT rejects (here 3) across its units and counts the rest; every
    one is stored with its line."""
    monkeypatch.setattr(app_ingest, "FILE_REJECTS_KEPT", 3)
    bad = tmp_path / "bad.ndjson"
    quiet = _quiet_unit(tmp_path).read_text()
    bad.write_text((quiet + "not json\n[1]\n") * 4)  # 16 lines, 8 rejected, in several units

    code, out = run(
        "ingest", "--config", _limits(tmp_path, maxLinesPerUnit=4), "--db", db, str(bad)
    )

    not_json = "not JSON: invalid literal, expected 'null': line 1 column 1 (char 0)"
    assert 1 == code
    assert [
        f"{bad}: 8 accepted, 0 skipped, 8 rejected",
        f"{bad}:3: {not_json}",
        f"{bad}:4: not a JSON object but list",
        f"{bad}:7: {not_json}",
        f"{bad}: 5 more rejected lines not shown (the first 3 are; the store's reject table "
        "holds each one's unit, line and reason)",
    ] == out.splitlines()
    engine = open_store(db)
    with engine.connect() as conn:
        lines = conn.execute(text("SELECT line FROM reject ORDER BY line")).scalars().all()
        units = conn.execute(text("SELECT count(*) FROM unit")).scalar_one()
    engine.dispose()
    assert [3, 4, 7, 8, 11, 12, 15, 16] == lines
    assert units > 1  # the kept rejects and the counted ones came from several units
