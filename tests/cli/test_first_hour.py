"""The first hour with the command line: the demo's traffic usable now (`demo --ingest`,
`demo --traffic`), the report right after an ingest, and help for every option."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from sidewatch.cli.audit import DEMO_AT, shifted
from sidewatch.cli.main import cli
from sidewatch.cli.options import parse_at

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures"
EXPECTED = json.loads((SHARED / "seed-audit.expected.json").read_text())["expected"]
OPEN = {r: s for r, s in EXPECTED.items() if s != "CLOSED_BY_DECLINE"}
SEED = Path(__file__).resolve().parents[2] / "sidewatch" / "cli" / "seed-audit.ndjson"


def run(*args: str, stdin: bytes | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), input=stdin)
    return result.exit_code, result.output


def open_states(db: str) -> dict[str, str]:
    code, out = run("audit", "--db", db, "--open", "--format", "json")
    assert 0 == code, out
    return {w["requestId"]: w["state"] for w in json.loads(out)["waits"]}


def test_right_after_demo_ingest_audit_open_shows_the_demos_open_states(db_url: str) -> None:
    code, out = run("demo", "--ingest", "--db", db_url)

    assert 0 == code, out
    assert OPEN == open_states(db_url)


def test_the_demos_traffic_piped_to_ingest_shows_the_same_states(db_url: str) -> None:
    code, traffic = run("demo", "--traffic")
    assert 0 == code

    code, out = run("ingest", "--db", db_url, "-", stdin=traffic.encode())

    assert (0, "-: 50 accepted, 18 skipped, 0 rejected\n") == (code, out)
    assert OPEN == open_states(db_url)


def test_the_example_file_as_it_is_is_audited_at_its_own_date(db_url: str) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "traffic.ndjson"
    run("ingest", "--db", db_url, str(example))

    states = open_states(db_url)

    assert OPEN != states  # dated 26 July 2026: by now most of it has expired
    assert SEED.read_bytes() == example.read_bytes()


def test_the_traffic_moves_every_time_by_the_same_amount() -> None:
    by = 86_400_000 + 1_000

    moved = [json.loads(line) for line in shifted(SEED.read_bytes(), by).splitlines()]
    given = [json.loads(line) for line in SEED.read_text().splitlines()]

    assert [e["timestamp"] + by for e in given] == [e["timestamp"] for e in moved]
    expiries = [
        (i["expiresAt"], m["expiresAt"])
        for e, f in zip(given, moved, strict=True)
        for i, m in zip(
            (e.get("outcome") or {}).get("interrupts", []),
            (f.get("outcome") or {}).get("interrupts", []),
            strict=True,
        )
    ]
    assert expiries
    for before, after in expiries:
        assert parse_at(before) + by == parse_at(after)
    assert [{k: v for k, v in e.items() if k != "timestamp" and k != "outcome"} for e in given] == [
        {k: v for k, v in e.items() if k != "timestamp" and k != "outcome"} for e in moved
    ]


def test_the_traffic_puts_the_demos_moment_at_this_second() -> None:
    before = int(time.time()) * 1000

    code, out = run("demo", "--traffic")

    latest = max(json.loads(line)["timestamp"] for line in out.splitlines())
    assert 0 == code
    assert before <= latest - (max(_seed_times()) - parse_at(DEMO_AT)) <= time.time() * 1000


def _seed_times() -> list[int]:
    return [json.loads(line)["timestamp"] for line in SEED.read_text().splitlines()]


def test_the_report_right_after_an_ingest_counts_its_unit(db_url: str) -> None:
    run("demo", "--ingest", "--db", db_url)

    code, out = run("report", "--db", db_url)

    assert 0 == code
    assert "1 unit(s) received in the window: 50 lines accepted, 18 skipped" in out
    assert "Units count in the window they were received in" not in out


def test_a_report_of_the_traffics_own_date_says_why_it_counts_no_unit(db_url: str) -> None:
    run("ingest", "--db", db_url, str(SEED))

    code, out = run("report", "--db", db_url, "--at", DEMO_AT)

    assert 0 == code
    assert (
        "0 unit(s) received in the window: 0 lines accepted, 0 skipped, 0 rejected (0 on the "
        "previous window). Units count in the window they were received in, not the one their "
        "events are dated in: traffic dated here but ingested later counts in its ingest's "
        "window."
    ) in out


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (
            ("--ingest", "--traffic"),
            "--ingest stores the traffic and --traffic prints it: give one",
        ),
        (("--db", "sqlite:///x.db"), "--config and --db name the store of --ingest"),
    ],
    ids=["both", "db-without-ingest"],
)
def test_demo_refuses_options_that_do_not_go_together(args: tuple[str, ...], error: str) -> None:
    code, out = run("demo", *args)

    assert (2, f"Error: {error}") == (code, out.splitlines()[-1])


def _options(command: click.Command, path: str) -> list[tuple[str, click.Option]]:
    found = [(path, p) for p in command.params if isinstance(p, click.Option)]
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            found += _options(sub, f"{path} {name}")
    return found


def test_every_option_of_every_command_has_help_text() -> None:
    options = _options(cli, "sidewatch")

    assert len(options) > 20  # the walk reaches the subcommands
    assert ("sidewatch demo", "--format") in {(path, o.opts[0]) for path, o in options}
    assert [] == [f"{path} {o.opts[0]}" for path, o in options if not (o.help or "").strip()]


def test_every_command_has_help_text() -> None:
    def commands(command: click.Command, path: str) -> list[tuple[str, click.Command]]:
        found = [(path, command)]
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                found += commands(sub, f"{path} {name}")
        return found

    assert [] == [path for path, c in commands(cli, "sidewatch") if not (c.help or "").strip()]


def test_demo_help_shows_its_format_option_with_help() -> None:
    code, out = run("demo", "--help")

    assert 0 == code
    assert "--format [table|json]  The audit as a table for people" in out
