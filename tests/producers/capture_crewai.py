"""Capture what ag-ui-crewai emits for crewai `@human_feedback` pauses, offline, through its
real FastAPI endpoint, with a scripted fake LLM (the one crewai asks to map feedback to an
outcome).

Usage: python capture_crewai.py OUTDIR   (in the venv of tests/producers/requirements-crewai.txt)
Writes crewai-<scenario>.ndjson files. Each line is either
  the RunAgentInput posted to start or resume a run (an object with threadId, runId, messages
  and no "type"), or
  an AG-UI event exactly as the endpoint streamed it (the SSE `data:` payload).
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

# crewai keeps paused flows in its storage dir and phones home unless told not to: a scratch
# dir, no telemetry, no tracing (before crewai is imported).
if "CREWAI_STORAGE_DIR" not in os.environ:
    _scratch = tempfile.mkdtemp(prefix="crewai-capture-")
    atexit.register(shutil.rmtree, _scratch, ignore_errors=True)
    os.environ["CREWAI_STORAGE_DIR"] = _scratch
os.environ["CREWAI_DISABLE_TELEMETRY"] = "true"
os.environ["OTEL_SDK_DISABLED"] = "true"
os.environ["CREWAI_TRACING_ENABLED"] = "false"

import crewai.flow.runtime as crewai_runtime
from ag_ui_crewai import agui_feedback_provider
from ag_ui_crewai.endpoint import add_crewai_flow_fastapi_endpoint
from crewai.flow import Flow, human_feedback, listen, start
from crewai.llms.base_llm import BaseLLM
from fastapi import FastAPI
from fastapi.testclient import TestClient

_PROMPT = re.compile(r"Feedback: (.*?)\n\nPossible outcomes: (.*?)\n", re.S)


class ScriptedLLM(BaseLLM):
    """No-network fake of the LLM crewai asks to map feedback to one of the step's outcomes:
    the outcome the feedback names (ignoring case), else the last one."""

    def call(self, messages: Any, *args: Any, **kwargs: Any) -> str:
        text = messages if isinstance(messages, str) else messages[-1]["content"]
        found = _PROMPT.search(text)
        assert found is not None, "unexpected collapse prompt"
        feedback, outcomes = found.group(1).strip(), found.group(2).split(", ")
        match = next((o for o in outcomes if o.lower() == feedback.lower()), outcomes[-1])
        return json.dumps({"outcome": match})

    def supports_function_calling(self) -> bool:
        return False

    def get_context_window_size(self) -> int:
        return 8192


LLM = ScriptedLLM(model="scripted-fake")


def _scripted_on_resume(llm: Any) -> Any:
    """crewai stores a paused step's LLM as its config and rebuilds it on resume as a litellm
    model of that name (a network model): the fake is put back in its place instead."""
    return LLM if llm is not None else None


crewai_runtime._resolve_llm_instance = _scripted_on_resume


class ApproveFlow(Flow):  # type: ignore[type-arg]
    """One pause whose outcomes are the plain labels approved / rejected."""

    @start()
    @human_feedback(
        message="Delete the demo file?",
        emit=["approved", "rejected"],
        llm=LLM,
        provider=agui_feedback_provider,
    )
    def propose(self) -> dict[str, str]:
        return {"action": "delete_file", "path": "/tmp/demo.txt"}

    @listen("approved")
    def delete(self) -> str:
        return "deleted"

    @listen("rejected")
    def keep(self) -> str:
        return "kept"


class PurgeFlow(Flow):  # type: ignore[type-arg]
    """One pause with the step's own outcome names; the first one runs the purge."""

    @start()
    @human_feedback(
        message="Purge the cache?",
        emit=["purge_approved", "purge_refused"],
        llm=LLM,
        provider=agui_feedback_provider,
    )
    def propose(self) -> str:
        return "purge the cache"

    @listen("purge_approved")
    def purge(self) -> str:
        return "purged"

    @listen("purge_refused")
    def keep(self) -> str:
        return "kept"


class TwoStepFlow(Flow):  # type: ignore[type-arg]
    """Two pauses in a row: crewai names both by the flow id, which is the thread id."""

    @start()
    @human_feedback(
        message="Delete the demo file?",
        emit=["approved", "rejected"],
        llm=LLM,
        provider=agui_feedback_provider,
    )
    def first(self) -> str:
        return "delete /tmp/demo.txt"

    @listen("approved")
    @human_feedback(
        message="Email the report?",
        emit=["send_approved", "send_refused"],
        llm=LLM,
        provider=agui_feedback_provider,
    )
    def second(self) -> str:
        return "email ops@example.com"

    @listen("send_approved")
    def send(self) -> str:
        return "sent"


class Client:
    """An AG-UI client of one thread over HTTP: posts inputs, records them and every event."""

    def __init__(self, flow: Flow, thread_id: str, **options: Any) -> None:  # type: ignore[type-arg]
        app = FastAPI()
        add_crewai_flow_fastapi_endpoint(app, flow, "/", **options)
        self.http = TestClient(app)
        self.thread_id = thread_id
        self.lines: list[str] = []
        self.interrupt_id: str | None = None  # of the latest pause, from either channel
        self.n = 0

    def run(self, *, user: str | None = None, resume: list[dict[str, Any]] | None = None) -> None:
        self.n += 1
        messages = []
        if user is not None:
            messages.append({"id": f"user-{self.n}", "role": "user", "content": user})
        inp: dict[str, Any] = {
            "threadId": self.thread_id,
            "runId": f"run-{self.n}",
            "state": {},
            "messages": messages,
            "tools": [],
            "context": [],
            "forwardedProps": {},
        }
        if resume is not None:
            inp["resume"] = resume
        self.lines.append(json.dumps(inp))
        self.interrupt_id = None
        with self.http.stream("POST", "/", json=inp, headers={"accept": "text/event-stream"}) as r:
            assert r.status_code == 200, r.status_code
            for raw in r.iter_lines():
                if not raw.startswith("data: "):
                    continue
                line = raw.removeprefix("data: ")
                self.lines.append(line)
                obj = json.loads(line)
                if obj["type"] == "CUSTOM" and obj.get("name") == "on_interrupt":
                    self.interrupt_id = obj["value"]["id"]

    def write(self, path: Path) -> None:
        path.write_text("\n".join(self.lines) + "\n")


def resolved(interrupt_id: str | None, payload: Any) -> dict[str, Any]:
    return {"interruptId": interrupt_id, "status": "resolved", "payload": payload}


def one_answer(
    out: Path,
    name: str,
    flow: Flow,
    answer: dict[str, Any] | None,
    **options: Any,  # type: ignore[type-arg]
) -> Client:
    c = Client(flow, f"thread-crewai-{name}", **options)
    c.run(user="Please go ahead.")
    if answer is not None:
        c.run(resume=[{**answer, "interruptId": answer.get("interruptId") or c.interrupt_id}])
    c.write(out / f"crewai-{name}.ndjson")
    return c


def main(outdir: str) -> None:
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    one_answer(out, "approve-default", ApproveFlow(), resolved(None, "approved"))
    one_answer(out, "decline-default", ApproveFlow(), resolved(None, "rejected"))
    one_answer(out, "own-label-refused", PurgeFlow(), resolved(None, "purge_refused"))
    one_answer(out, "own-label-approved", PurgeFlow(), resolved(None, "purge_approved"))
    # a cancel is sent to crewai as empty feedback: it resolves to the first outcome
    one_answer(out, "cancel-default", PurgeFlow(), {"status": "cancelled"})
    one_answer(
        out,
        "approve-outcome",
        ApproveFlow(),
        resolved(None, "approved"),
        emit_interrupt_outcome=True,
    )
    one_answer(
        out, "cancel-outcome", PurgeFlow(), {"status": "cancelled"}, emit_interrupt_outcome=True
    )
    # the interrupt id is not checked: an answer naming another id is applied anyway
    one_answer(out, "wrong-id", ApproveFlow(), resolved("not-an-interrupt", "rejected"))

    # two pauses in a row, both named by the thread id
    c = Client(TwoStepFlow(), "thread-crewai-two-pauses")
    c.run(user="Please go ahead.")
    c.run(resume=[resolved(c.interrupt_id, "approved")])
    c.run(resume=[resolved(c.interrupt_id, "send_approved")])
    c.write(out / "crewai-two-pauses.ndjson")

    # two entries in one resume: only the first is used
    c = Client(ApproveFlow(), "thread-crewai-two-entries")
    c.run(user="Please go ahead.")
    c.run(resume=[resolved(c.interrupt_id, "rejected"), resolved("second", "approved")])
    c.write(out / "crewai-two-entries.ndjson")

    # a new message without a resume on a paused thread
    c = Client(ApproveFlow(), "thread-crewai-new-message")
    c.run(user="Please go ahead.")
    c.run(user="Actually, what is the status?")
    c.write(out / "crewai-new-message-no-resume.ndjson")


if __name__ == "__main__":
    main(sys.argv[1])
