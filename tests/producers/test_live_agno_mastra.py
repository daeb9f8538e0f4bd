"""agno's AG-UI interface (Python, `.tools/venv-agno`) and @ag-ui/mastra on @mastra/core
(TypeScript, `.tools/node-mastra`, run by the machine's Node.js), driven live with scripted
stand-ins for the model: what each really does (issue 31), that the recorded fixtures are still
what they emit, and the verdicts sidewatch gives today where those are already right."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.ingest.producers.captures import CAPTURES as PRODUCERS
from tests.ingest.producers.captures import verdicts_of
from tests.ingest.producers.test_frontend import frontend_waits
from tests.producers.harness import HERE, capture
from tests.producers.venvs import TOOLS, producer_python

MASTRA = HERE / "mastra"
Run = tuple[dict[str, Any], list[dict[str, Any]]]


def mastra_modules(tools: Path = TOOLS) -> Path:
    """The node_modules npm installed from the current lock file, or a loud failure."""
    lock, where = MASTRA / "package-lock.json", tools / "node-mastra"
    stamp = where / ".installed"
    if not stamp.exists() or not (where / "node_modules").is_dir():
        pytest.fail(f"{where} is missing: run `make {where}/.installed`", pytrace=False)
    if stamp.read_text().strip() != hashlib.sha256(lock.read_bytes()).hexdigest():
        pytest.fail(f"{where} predates {lock.name}: run `make test`", pytrace=False)
    return where / "node_modules"


@pytest.fixture(scope="module")
def emitted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both capture scripts run once: agno in its venv, Mastra by node beside its packages."""
    out = tmp_path_factory.mktemp("producers")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    capture(producer_python("agno"), "capture_agno.py", out, env)
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is missing: the Mastra capture needs Node.js 20", pytrace=False)
    # ESM resolves packages beside the script: a copy of it next to the installed modules
    work = tmp_path_factory.mktemp("mastra")
    shutil.copy(MASTRA / "capture.mjs", work / "capture.mjs")
    (work / "node_modules").symlink_to(mastra_modules().resolve())
    done = subprocess.run(
        [node, str(work / "capture.mjs"), str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert 0 == done.returncode, done.stderr[-2000:]
    return out


def runs(path: Path) -> list[Run]:
    """The runs of one capture: each input line with the events streamed for it."""
    got: list[Run] = []
    for line in path.read_text().splitlines():
        obj = json.loads(line)
        if "type" in obj:
            got[-1][1].append(obj)
        else:
            got.append((obj, []))
    return got


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def results(events: list[dict[str, Any]]) -> dict[str, Any]:
    """toolCallId -> the decoded content of its TOOL_CALL_RESULT."""
    return {e["toolCallId"]: json.loads(e["content"]) for e in events if "RESULT" in e["type"]}


AGNO = sorted(p.stem for p in PRODUCERS.glob("agno-*.ndjson"))
MASTRA_FILES = sorted(p.stem for p in PRODUCERS.glob("mastra-*.ndjson"))


@pytest.mark.parametrize("name", AGNO + MASTRA_FILES)
def test_the_recorded_fixture_is_what_the_integration_emits_now(emitted: Path, name: str) -> None:
    def shape(path: Path) -> list[list[str]]:
        return [["input", *types(events)] for _, events in runs(path)]

    assert shape(PRODUCERS / f"{name}.ndjson") == shape(emitted / f"{name}.ndjson")


# --- agno 3.1.10 -------------------------------------------------------------------------


def test_agno_announces_a_pause_only_as_a_pending_tool_call_and_a_plain_run_finished(
    emitted: Path,
) -> None:
    _, asked = runs(emitted / "agno-approve.ndjson")[0]
    finished = asked[-1]

    assert "RUN_FINISHED" == finished["type"]
    assert "outcome" not in finished and "result" not in finished
    assert not {"CUSTOM", "RUN_ERROR", "TOOL_CALL_RESULT"} & set(types(asked))
    assert ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"] == [
        t for t in types(asked) if t.startswith("TOOL_CALL")
    ]


@pytest.mark.parametrize(
    ("name", "ran"),
    [("agno-approve", True), ("agno-decline", False), ("agno-approve-other-shape", False)],
)
def test_agno_runs_the_action_only_for_accepted_true(emitted: Path, name: str, ran: bool) -> None:
    """`{"accepted": false}` and `{"approved": true}` alike are a rejection: no result."""
    _, answered = runs(emitted / f"{name}.ndjson")[1]

    assert ran == ("call_del_1" in results(answered))
    assert "RUN_ERROR" not in types(answered)


def test_agno_keeps_a_paused_call_after_a_later_successful_run_and_a_late_answer_runs_it(
    emitted: Path,
) -> None:
    (_, asked), (_, later), (_, answered) = runs(
        emitted / "agno-late-answer-after-later-run.ndjson"
    )

    assert "RUN_FINISHED" == asked[-1]["type"] == later[-1]["type"]
    assert "call_del_1" not in results(later)
    assert {"call_del_1": "deleted /tmp/demo.txt"} == results(answered)


def test_agno_answers_two_calls_in_one_resume_and_drops_an_unanswered_one_silently(
    emitted: Path,
) -> None:
    _, both = runs(emitted / "agno-two-approvals.ndjson")[1]
    _, one = runs(emitted / "agno-two-approvals-one-answered.ndjson")[1]

    assert {"call_del_a": "deleted /tmp/a.txt"} == results(both)  # the email was declined
    assert {"call_del_a": "deleted /tmp/a.txt"} == results(one)  # the email: no answer, no run
    assert "RUN_ERROR" not in types(one) and "call_mail_b" not in json.dumps(one)


def test_agno_refuses_an_answer_to_an_unknown_call_with_run_error(emitted: Path) -> None:
    _, answered = runs(emitted / "agno-wrong-id.ndjson")[1]

    assert ["RUN_STARTED", "STATE_SNAPSHOT", "RUN_ERROR"] == types(answered)


# --- @ag-ui/mastra 1.1.2 on @mastra/core 1.71.0 --------------------------------------------


def interrupts(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    outcome = events[-1].get("outcome") or {}
    return list(outcome.get("interrupts", []))


def test_mastra_interrupt_ids_carry_the_first_runs_id_even_when_asked_in_a_later_run(
    emitted: Path,
) -> None:
    (_, first), (_, second), _ = runs(emitted / "mastra-two-suspensions.ndjson")

    assert ["run-1::call_refund_a"] == [i["id"] for i in interrupts(first)]
    assert ["run-1::call_refund_b"] == [i["id"] for i in interrupts(second)]
    assert "run-2" == second[-1]["runId"]


def test_mastra_reads_only_the_first_resume_entry(emitted: Path) -> None:
    """Two answers in one resume: the second stays asked; an unknown first one fails the run
    even though the second names the real interrupt."""
    (inp, second) = runs(emitted / "mastra-two-suspensions.ndjson")[1]
    (bad, failed) = runs(emitted / "mastra-two-entries-unknown-first.ndjson")[1]

    assert 2 == len(inp["resume"]) == len(bad["resume"])
    assert ["call_refund_b"] == [i["toolCallId"] for i in interrupts(second)]
    assert ["RUN_STARTED"] == types(failed)


@pytest.mark.parametrize("name", ["mastra-wrong-id", "mastra-two-entries-unknown-first"])
def test_mastra_reports_a_failure_by_breaking_the_stream_without_run_error(
    emitted: Path, name: str
) -> None:
    _, failed = runs(emitted / f"{name}.ndjson")[-1]

    assert ["RUN_STARTED"] == types(failed)


def test_mastra_cancels_on_its_own_and_keeps_the_suspension_a_later_answer_runs(
    emitted: Path,
) -> None:
    """The adapter closes a cancelled interrupt itself (a bare RUN_FINISHED) without telling
    Mastra: the suspended call is still there, and an answer after it runs the action."""
    (_, _), (_, cancelled), (_, answered) = runs(emitted / "mastra-cancel-then-answer.ndjson")

    assert ["RUN_STARTED", "RUN_FINISHED"] == types(cancelled)
    assert {"call_refund_1": "refunded A-1"} == results(answered)


def test_mastra_keeps_a_suspension_after_a_later_successful_run_and_a_late_answer_runs_it(
    emitted: Path,
) -> None:
    (_, _), (_, later), (_, answered) = runs(emitted / "mastra-late-answer-after-later-run.ndjson")

    assert "RUN_FINISHED" == later[-1]["type"] and not interrupts(later)
    assert {"call_refund_1": "refunded A-1"} == results(answered)


def test_mastra_streams_no_tool_call_for_a_lone_suspended_call_its_args_are_in_metadata(
    emitted: Path,
) -> None:
    """The arguments travel only in the interrupt's metadata.mastra.args and in the legacy
    CUSTOM on_interrupt value (a JSON string)."""
    _, asked = runs(emitted / "mastra-approve.ndjson")[0]
    (custom,) = [e for e in asked if e["type"] == "CUSTOM"]
    (interrupt,) = interrupts(asked)

    assert not [t for t in types(asked) if t.startswith("TOOL_CALL")]
    assert {"order": "A-1", "amount": 20} == interrupt["metadata"]["mastra"]["args"]
    assert "on_interrupt" == custom["name"]
    assert {"order": "A-1", "amount": 20} == json.loads(custom["value"])["args"]


def test_mastra_streams_tool_calls_for_the_first_of_two_suspended_calls(emitted: Path) -> None:
    """Not as the issue had it: with two calls in one step, the first one (which suspends)
    is streamed as TOOL_CALL_START/ARGS/END before its interrupt."""
    _, asked = runs(emitted / "mastra-two-suspensions.ndjson")[0]

    assert ["call_refund_a"] * 3 == [e["toolCallId"] for e in asked if "TOOL_CALL" in e["type"]]


def test_mastra_require_approval_calls_are_not_interrupts(emitted: Path) -> None:
    """A requireApproval tool call is a plain pending tool call and a plain RUN_FINISHED; the
    adapter drops Mastra's approval request and the tool never runs."""
    (_, asked), (_, later) = runs(emitted / "mastra-require-approval.ndjson")

    assert "CUSTOM" not in types(asked) and not interrupts(asked)
    assert ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "RUN_FINISHED"] == types(asked)[
        1:
    ]
    assert {} == results(asked) == results(later)


# --- what sidewatch makes of them today, where that is already right ----------------------

# with `waits.frontendTools` naming agno's confirmation tools (agno announces nothing else)
AGNO_TOOLS = ("delete_file", "send_email")
AGNO_RIGHT = {
    "agno-approve": [("RESUMED", "accept", False)],
    "agno-decline": [("CLOSED_BY_DECLINE", "decline", False)],
    "agno-two-approvals": [("RESUMED", "accept", False), ("CLOSED_BY_DECLINE", "decline", False)],
    # a new message moved past the pause: closed provisionally, as the spec says
    "agno-new-message-no-resume": [("CANCELLED", None, True)],
    # the answered call ran, the unanswered one agno rejected unseen: dropped, as far as the
    # stream shows (and agno will not take an answer for it later: the run is no longer paused)
    "agno-two-approvals-one-answered": [("RESUMED", "accept", False), ("CANCELLED", None, True)],
    # agno refused the answer with RUN_ERROR: the call is still paused
    "agno-wrong-id": [("WAITING", None, False)],
    # a later run moved past the pause, then an answer ran the call: reopened (issue 31)
    "agno-late-answer-after-later-run": [("RESUMED", "accept", False)],
}
MASTRA_RIGHT = {
    "mastra-approve": [("RESUMED", "accept", False)],
    "mastra-decline": [("CLOSED_BY_DECLINE", "decline", False)],
    "mastra-cancel": [("CANCELLED", "cancel", False)],
    "mastra-new-message-no-resume": [("CANCELLED", None, True)],
    "mastra-two-suspensions": [("RESUMED", "accept", False)] * 2,
    # the resume broke the stream: the suspension is still there
    "mastra-wrong-id": [("WAITING", None, False)],
    # a later run moved past the suspension, then an answer ran the refund: reopened
    "mastra-late-answer-after-later-run": [("RESUMED", "accept", False)],
}


@pytest.mark.parametrize(("name", "expected"), AGNO_RIGHT.items(), ids=list(AGNO_RIGHT))
def test_agno_fixtures_get_the_verdicts_of_what_happened(
    db_url: str, name: str, expected: list[tuple[str, str | None, bool]]
) -> None:
    waits = frontend_waits(db_url, (PRODUCERS / f"{name}.ndjson").read_bytes(), AGNO_TOOLS)

    assert expected == [
        (
            w.verdict.state.value,
            w.verdict.facts.decision and w.verdict.facts.decision.value,
            w.verdict.uncertain,
        )
        for w in waits
    ]


def test_agno_without_frontend_tools_gives_no_wait(db_url: str) -> None:
    assert [] == verdicts_of(db_url, (PRODUCERS / "agno-approve.ndjson").read_bytes())


@pytest.mark.parametrize(("name", "expected"), MASTRA_RIGHT.items(), ids=list(MASTRA_RIGHT))
def test_mastra_fixtures_get_the_verdicts_of_what_happened(
    db_url: str, name: str, expected: list[tuple[str, str | None, bool]]
) -> None:
    assert expected == verdicts_of(db_url, (PRODUCERS / f"{name}.ndjson").read_bytes())
