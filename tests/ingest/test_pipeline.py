"""End to end: units ingested into a real store (SQLite and PostgreSQL), then audited at a
given time."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import rfc8785

from sidewatch.app.audit import audit, classified
from sidewatch.app.ingest import Ingest
from sidewatch.config import Config
from sidewatch.core.engine import evaluate
from sidewatch.core.model import Missing, Phase, State, Verdict
from sidewatch.core.policy import DEFAULT_POLICY
from sidewatch.ingest.digest import RefProtector
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store
from tests.storerows import fact_counts

FIXTURES = Path("/work/shared/fixtures")
BASE = 1_785_081_600_000  # 2026-07-26T16:00:00Z
MIN = 60_000
PROTECT = RefProtector(b"test-key", ("role:", "policy:"))


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    engine = open_store(db_url)
    yield Store(engine)
    engine.dispose()


def ingest(store: Store, *lines: dict[str, Any] | bytes, received_at: int = BASE) -> Any:
    body = b"\n".join(line if isinstance(line, bytes) else orjson.dumps(line) for line in lines)
    return Ingest(store, PROTECT, Config()).body("test", body, received_at)


def verdicts(store: Store, at: int) -> dict[str, State]:
    return {a.verdict.request_id: a.verdict.state for a in audit(store, (DEFAULT_POLICY,), at)}


def verdict(store: Store, at: int, request_id: str = "t1/i1") -> Verdict:
    found = [a.verdict for a in audit(store, (DEFAULT_POLICY,), at)]
    return next(v for v in found if v.request_id == request_id)


def digest_of(name: str, args: Any) -> str:
    canonical = rfc8785.dumps({"name": name, "args": args})
    return "sha256:" + hashlib.sha256(canonical).hexdigest()


# -- wire lines ------------------------------------------------------------------------


def event(type_: str, at: int | None, **fields: Any) -> dict[str, Any]:
    line: dict[str, Any] = {"type": type_, **fields}
    if at is not None:
        line["timestamp"] = at
    return line


def run_started(run: str, at: int, thread: str = "t1") -> dict[str, Any]:
    return event("RUN_STARTED", at, threadId=thread, runId=run)


def run_finished(run: str, at: int, thread: str = "t1", **kw: Any) -> dict[str, Any]:
    return event("RUN_FINISHED", at, threadId=thread, runId=run, **kw)


def run_error(at: int) -> dict[str, Any]:
    return event("RUN_ERROR", at, message="continuation failed")


def run_input(run: str, at: int, *resume: dict[str, Any], thread: str = "t1") -> dict[str, Any]:
    line: dict[str, Any] = {"threadId": thread, "runId": run, "messages": [], "timestamp": at}
    if resume:
        line["resume"] = list(resume)
    return line


def resolved(interrupt_id: str, payload: Any) -> dict[str, Any]:
    return {"interruptId": interrupt_id, "status": "resolved", "payload": payload}


def cancelled(interrupt_id: str) -> dict[str, Any]:
    return {"interruptId": interrupt_id, "status": "cancelled"}


def tool_result(call_id: str, at: int) -> dict[str, Any]:
    return event("TOOL_CALL_RESULT", at, messageId="m-result", toolCallId=call_id, content="ok")


def announce(
    run: str, at: int, interrupt_id: str = "i1", thread: str = "t1", **fields: Any
) -> dict[str, Any]:
    """The run's end with the interrupt outcome: one interrupt, with a resume handle."""
    it = {
        "id": interrupt_id,
        "reason": "tool_call",
        "toolCallId": f"call-{interrupt_id}",
        "metadata": {"resumeHandle": f"ckpt:{thread}:{run}"},
        **fields,
    }
    return run_finished(run, at, thread, outcome={"type": "interrupt", "interrupts": [it]})


def asked(
    run: str = "r1", at: int = BASE, interrupt_id: str = "i1", thread: str = "t1", **fields: Any
) -> list[dict[str, Any]]:
    """A run that proposes a gated tool call and stops on the interrupt for it."""
    call = f"call-{interrupt_id}"
    return [
        run_started(run, at - 1000, thread),
        event("TOOL_CALL_START", at - 900, toolCallId=call, toolCallName="deploy"),
        event("TOOL_CALL_ARGS", None, toolCallId=call, delta='{"target": "prod"}'),
        event("TOOL_CALL_END", at - 800, toolCallId=call),
        announce(run, at, interrupt_id, thread, **fields),
    ]


def evidence(name: str, value: dict[str, Any], at: int) -> dict[str, Any]:
    return event("CUSTOM", at, name=f"sidewatch.{name}", value=value)


def routed(at: int, ref: dict[str, Any] | None = None) -> dict[str, Any]:
    ref = ref or {"threadId": "t1", "interruptId": "i1"}
    return evidence("route", {**ref, "approverRef": "role:ops", "delivered": True}, at)


def alive(at: int, thread: str = "t1", **value: Any) -> dict[str, Any]:
    return evidence("heartbeat", {"threadId": thread, **value}, at)


def decided(word: str, at: int, ref: dict[str, Any] | None = None) -> dict[str, Any]:
    ref = ref or {"threadId": "t1", "interruptId": "i1"}
    return evidence("decision", {**ref, "decision": word}, at)


def untimed(*lines: dict[str, Any]) -> list[dict[str, Any]]:
    """The lines as producers that set no timestamps send them."""
    return [{k: v for k, v in line.items() if k != "timestamp"} for line in lines]


def healthy_wait(store: Store) -> None:
    """t1/i1 asked at BASE, delivered to an approver, with a fresh heartbeat."""
    ingest(store, *asked(), routed(BASE + MIN), alive(BASE + 2 * MIN))


# -- the reference audit ---------------------------------------------------------------


def test_the_reference_stream_gives_one_verdict_of_each_state(store: Store) -> None:
    Ingest(store, PROTECT, Config()).body(
        "seed", (FIXTURES / "seed-audit.ndjson").read_bytes(), BASE
    )
    expected = json.loads((FIXTURES / "seed-audit.expected.json").read_text())["expected"]

    assert expected == verdicts(store, BASE + 30 * MIN)  # evaluated at 16:30


# -- a wait and its evidence -----------------------------------------------------------


def test_a_routed_wait_with_a_fresh_heartbeat_is_waiting_for_a_decision(store: Store) -> None:
    healthy_wait(store)

    v = verdict(store, BASE + 5 * MIN)
    expected = (State.WAITING, Phase.AWAITING_DECISION, "delivered")

    assert expected == (
        v.state,
        v.phase,
        v.facts.route,
    )


def test_the_wait_has_the_digest_of_its_gated_tool_call(store: Store) -> None:
    healthy_wait(store)

    v = verdict(store, BASE + 5 * MIN)
    expected = digest_of("deploy", {"target": "prod"})

    assert expected == v.facts.action_digest


def test_a_gated_call_streamed_in_an_earlier_unit_gives_the_digest(store: Store) -> None:
    *call, end_of_run = asked()
    ingest(store, *call, received_at=BASE)
    ingest(store, end_of_run, routed(BASE + MIN), received_at=BASE + MIN)

    v = verdict(store, BASE + 5 * MIN)
    expected = digest_of("deploy", {"target": "prod"})

    assert expected == v.facts.action_digest


def test_a_digest_in_the_interrupts_metadata_is_used_as_given(store: Store) -> None:
    meta = {"resumeHandle": "ckpt", "governance": {"actionFingerprint": "sha256:from-producer"}}
    ingest(store, *asked(metadata=meta), routed(BASE + MIN))

    v = verdict(store, BASE + 5 * MIN)
    expected = "sha256:from-producer"

    assert expected == v.facts.action_digest


def test_evidence_from_an_earlier_unit_than_its_wait_is_applied(store: Store) -> None:
    ingest(store, routed(BASE + MIN), alive(BASE + 2 * MIN), received_at=BASE + 3 * MIN)
    ingest(store, *asked(), received_at=BASE + 4 * MIN)

    v = verdict(store, BASE + 5 * MIN)
    expected = (State.WAITING, "delivered", "role:ops")

    assert expected == (
        v.state,
        v.facts.route,
        v.facts.approver_ref,
    )


def test_a_decision_by_request_id_from_an_earlier_unit_is_applied(store: Store) -> None:
    ingest(store, decided("decline", BASE + MIN, {"requestId": "req-42"}))
    ingest(store, *asked(metadata={"requestId": "req-42", "resumeHandle": "ckpt"}))
    expected = {"req-42": State.CLOSED_BY_DECLINE}

    assert expected == verdicts(store, BASE + 5 * MIN)


def test_an_answer_from_an_earlier_unit_than_its_wait_is_applied(store: Store) -> None:
    ingest(
        store,
        run_input("r2", BASE + 3 * MIN, resolved("i1", True)),
        run_started("r2", BASE + 4 * MIN),
    )
    ingest(store, *asked(), routed(BASE + MIN))
    expected = {"t1/i1": State.RESUMED}

    assert expected == verdicts(store, BASE + 10 * MIN)


def test_metadata_request_id_is_the_request_id_and_evidence_may_name_it(store: Store) -> None:
    ref = {"requestId": "req-42"}
    ingest(
        store,
        *asked(metadata={"requestId": "req-42", "resumeHandle": "ckpt"}),
        routed(BASE + MIN, ref),
        decided("accept", BASE + 2 * MIN, ref),
        evidence("receipt", ref, BASE + 3 * MIN),
    )
    expected = {"req-42": State.RESUMED}

    assert expected == verdicts(store, BASE + 10 * MIN)


def test_a_heartbeat_with_a_null_resume_handle_orphans_the_wait(store: Store) -> None:
    healthy_wait(store)
    ingest(store, alive(BASE + 3 * MIN, resumeHandle=None))

    v = verdict(store, BASE + 4 * MIN)
    expected = (State.ORPHANED, False)

    assert expected == (v.state, v.uncertain)


def test_an_unparsable_expires_at_never_expires_the_wait(store: Store) -> None:
    ingest(store, *asked(expiresAt="end of business"), routed(BASE + MIN), alive(BASE + 2 * MIN))

    v = verdict(store, BASE + 5 * MIN)
    expected = (State.WAITING, None)

    assert expected == (v.state, v.facts.expires_at)


def test_a_bad_line_is_reported_and_the_rest_of_the_unit_is_stored(store: Store) -> None:
    summary = ingest(store, b"{not json", run_error(BASE - 2000), *asked(), routed(BASE + MIN))
    expected = ([(1, "not_json"), (2, "no_run_context")], State.WAITING)

    assert expected == (
        [(r.line, r.reason) for r in summary.rejects],
        verdict(store, BASE + 2 * MIN).state,
    )


# -- delivery is at least once ---------------------------------------------------------


def test_ingesting_the_same_unit_twice_changes_nothing(store: Store) -> None:
    body = (FIXTURES / "seed-audit.ndjson").read_bytes()
    Ingest(store, PROTECT, Config()).body("seed", body, BASE)
    expected = (fact_counts(store), verdicts(store, BASE + 30 * MIN))

    Ingest(store, PROTECT, Config()).body("seed", body, BASE + MIN)

    assert expected == (fact_counts(store), verdicts(store, BASE + 30 * MIN))


def test_ingesting_a_resume_unit_twice_changes_nothing(store: Store) -> None:
    ingest(store, *asked(), routed(BASE + MIN), alive(BASE + 2 * MIN, resumeHandle="ckpt"))
    resume = [
        run_input("r2", BASE + 3 * MIN, resolved("i1", {"approved": True})),
        run_started("r2", BASE + 3 * MIN + 1000),
        tool_result("call-i1", BASE + 4 * MIN),
        run_finished("r2", BASE + 5 * MIN),
    ]
    ingest(store, *resume, received_at=BASE + 5 * MIN)
    expected = (fact_counts(store), verdicts(store, BASE + 10 * MIN))

    ingest(store, *resume, received_at=BASE + 6 * MIN)

    assert expected == (fact_counts(store), verdicts(store, BASE + 10 * MIN))


def test_without_timestamps_arrival_order_decides_and_redelivery_changes_nothing(
    store: Store,
) -> None:
    asking = untimed(*asked(), routed(0))
    answering = untimed(run_input("r2", 0, resolved("i1", True)), run_started("r2", 0))
    ingest(store, *asking, received_at=BASE)
    ingest(store, *answering, received_at=BASE + 3 * MIN)
    expected = (fact_counts(store), {"t1/i1": State.RESUMED})

    ingest(store, *asking, received_at=BASE + 4 * MIN)
    ingest(store, *answering, received_at=BASE + 4 * MIN)

    assert expected == (fact_counts(store), verdicts(store, BASE + 5 * MIN))


# -- answers through resume[] ----------------------------------------------------------


def test_an_accepted_resume_and_the_start_of_the_continuing_run_resume_the_wait(
    store: Store,
) -> None:
    healthy_wait(store)
    ingest(
        store,
        run_input("r2", BASE + 3 * MIN, resolved("i1", {"approved": True})),
        run_started("r2", BASE + 3 * MIN + 1000),
    )

    v = verdict(store, BASE + 10 * MIN)
    expected = (State.RESUMED, BASE + 3 * MIN + 1000)

    assert expected == (v.state, v.facts.receipt_at)


def test_an_accepted_resume_without_the_run_starting_awaits_its_receipt(store: Store) -> None:
    healthy_wait(store)
    ingest(store, run_input("r2", BASE + 3 * MIN, resolved("i1", True)))

    v = verdict(store, BASE + 4 * MIN)
    expected = (State.WAITING, Phase.AWAITING_RECEIPT)

    assert expected == (v.state, v.phase)


def test_a_declining_resume_closes_the_wait_by_decline(store: Store) -> None:
    healthy_wait(store)
    ingest(
        store,
        run_input("r2", BASE + 3 * MIN, resolved("i1", {"decision": "reject"})),
        run_started("r2", BASE + 3 * MIN + 1000),
    )
    expected = {"t1/i1": State.CLOSED_BY_DECLINE}

    assert expected == verdicts(store, BASE + 10 * MIN)


def test_a_cancelled_resume_entry_cancels_the_wait(store: Store) -> None:
    healthy_wait(store)
    ingest(
        store,
        run_input("r2", BASE + 3 * MIN, cancelled("i1")),
        run_started("r2", BASE + 3 * MIN + 1000),
    )

    v = verdict(store, BASE + 10 * MIN)
    expected = (State.CANCELLED, False)

    assert expected == (v.state, v.uncertain)


def test_a_run_error_after_the_resume_input_leaves_the_wait_stuck(store: Store) -> None:
    healthy_wait(store)
    ingest(
        store,
        run_input("r2", BASE + 3 * MIN, resolved("i1", True)),
        run_error(BASE + 3 * MIN + 1000),
    )

    v = verdict(store, BASE + 4 * MIN)
    expected = (State.STUCK_AFTER_DECISION, True)

    assert expected == (v.state, v.facts.continuation_failed)


def test_a_later_retry_that_starts_resumes_a_wait_stuck_by_a_run_error(store: Store) -> None:
    healthy_wait(store)
    ingest(
        store,
        run_input("r2", BASE + 3 * MIN, resolved("i1", True)),
        run_error(BASE + 3 * MIN + 1000),
    )
    ingest(
        store,
        run_input("r3", BASE + 6 * MIN, resolved("i1", True)),
        run_started("r3", BASE + 6 * MIN + 1000),
    )
    expected = [State.STUCK_AFTER_DECISION, State.RESUMED]

    assert expected == [
        verdict(store, BASE + 5 * MIN).state,
        verdict(store, BASE + 7 * MIN).state,
    ]


def test_a_run_error_after_the_continuing_run_started_makes_a_resumed_wait_stuck(
    store: Store,
) -> None:
    healthy_wait(store)
    ingest(
        store,
        run_input("r2", BASE + 3 * MIN, resolved("i1", True)),
        run_started("r2", BASE + 3 * MIN + 1000),
        run_error(BASE + 3 * MIN + 2000),
    )
    expected = [State.RESUMED, State.STUCK_AFTER_DECISION]

    assert expected == [
        verdict(store, BASE + 3 * MIN + 1500).state,
        verdict(store, BASE + 4 * MIN).state,
    ]


def test_an_accept_given_at_or_after_expiry_is_stale_even_when_a_run_consumes_it(
    store: Store,
) -> None:
    ingest(store, *asked(expiresAt="2026-07-26T16:02:00Z"), routed(BASE + MIN), alive(BASE + MIN))
    ingest(
        store,
        run_input("r2", BASE + 2 * MIN, resolved("i1", True)),
        run_started("r2", BASE + 2 * MIN + 1000),
    )
    expected = {"t1/i1": State.STALE}

    assert expected == verdicts(store, BASE + 5 * MIN)


def test_a_lone_answer_naming_an_unknown_id_is_the_lone_open_waits_marked_uncertain(
    store: Store,
) -> None:
    healthy_wait(store)
    ingest(
        store,
        run_input("r2", BASE + 3 * MIN, resolved("not-i1", True)),
        run_started("r2", BASE + 3 * MIN + 1000),
        run_finished("r2", BASE + 4 * MIN),
    )

    v = verdict(store, BASE + 5 * MIN)
    expected = (State.RESUMED, True)

    assert expected == (v.state, v.uncertain)


# -- receipts --------------------------------------------------------------------------


def test_the_gated_calls_result_in_a_later_run_is_a_receipt(store: Store) -> None:
    healthy_wait(store)
    ingest(
        store,
        decided("accept", BASE + 3 * MIN),
        run_started("r2", BASE + 4 * MIN),
        tool_result("call-i1", BASE + 5 * MIN),
    )

    v = verdict(store, BASE + 20 * MIN)
    expected = (State.RESUMED, BASE + 5 * MIN)

    assert expected == (v.state, v.facts.receipt_at)


def test_a_receipt_event_is_a_receipt(store: Store) -> None:
    healthy_wait(store)
    ingest(
        store,
        decided("accept", BASE + 3 * MIN),
        evidence("receipt", {"threadId": "t1", "interruptId": "i1"}, BASE + 4 * MIN),
    )

    v = verdict(store, BASE + 20 * MIN)
    expected = (State.RESUMED, BASE + 4 * MIN)

    assert expected == (v.state, v.facts.receipt_at)


def test_an_accept_with_no_receipt_past_the_resume_grace_is_stuck(store: Store) -> None:
    healthy_wait(store)
    ingest(store, decided("accept", BASE + 3 * MIN))

    v = verdict(store, BASE + 8 * MIN + 1)
    expected = State.STUCK_AFTER_DECISION

    assert expected == v.state


# -- runs that move past a wait --------------------------------------------------------


def test_a_later_run_that_finishes_without_answering_the_wait_drops_it(store: Store) -> None:
    healthy_wait(store)
    ingest(store, run_started("r2", BASE + 3 * MIN), run_finished("r2", BASE + 4 * MIN))

    v = verdict(store, BASE + 5 * MIN)
    expected = (State.CANCELLED, True, True)

    assert expected == (v.state, v.uncertain, Missing.DECISION in v.missing)


def test_a_later_run_that_finishes_past_an_accepted_wait_leaves_it_stuck(store: Store) -> None:
    healthy_wait(store)
    ingest(
        store,
        decided("accept", BASE + 2 * MIN),
        run_started("r2", BASE + 3 * MIN),
        run_finished("r2", BASE + 4 * MIN),
    )

    v = verdict(store, BASE + 5 * MIN)  # still inside the resume grace of the accept
    expected = State.STUCK_AFTER_DECISION

    assert expected == v.state


def test_a_run_that_began_before_the_wait_was_announced_does_not_move_past_it(
    store: Store,
) -> None:
    ingest(store, run_started("r0", BASE - 5000))
    healthy_wait(store)
    ingest(store, run_finished("r0", BASE + 3 * MIN))
    expected = {"t1/i1": State.WAITING}

    assert expected == verdicts(store, BASE + 5 * MIN)


def test_a_later_run_that_is_cancelled_does_not_move_past_the_wait(store: Store) -> None:
    healthy_wait(store)
    ingest(
        store,
        run_started("r2", BASE + 3 * MIN),
        run_finished("r2", BASE + 4 * MIN, outcome={"type": "cancelled"}),
    )
    expected = {"t1/i1": State.WAITING}

    assert expected == verdicts(store, BASE + 5 * MIN)


# -- identity --------------------------------------------------------------------------


def test_an_interrupt_announced_again_by_the_same_run_is_one_wait(store: Store) -> None:
    healthy_wait(store)
    ingest(store, announce("r1", BASE + 3 * MIN))

    found = audit(store, (DEFAULT_POLICY,), BASE + 5 * MIN)
    expected = [("t1/i1", BASE)]

    assert expected == [(a.verdict.request_id, a.evidence.requested_at) for a in found]


def test_an_open_interrupt_announced_again_by_a_later_run_is_one_wait(store: Store) -> None:
    healthy_wait(store)
    ingest(store, run_started("r2", BASE + 3 * MIN), announce("r2", BASE + 4 * MIN))

    found = audit(store, (DEFAULT_POLICY,), BASE + 5 * MIN)
    expected = [("t1/i1", State.WAITING)]

    assert expected == [(a.verdict.request_id, a.verdict.state) for a in found]


def test_an_id_reused_by_a_later_run_after_the_wait_closed_opens_a_new_wait(
    store: Store,
) -> None:
    healthy_wait(store)
    ingest(
        store,
        run_input("r2", BASE + 3 * MIN, resolved("i1", True)),
        run_started("r2", BASE + 3 * MIN + 1000),
        announce("r2", BASE + 4 * MIN),
    )

    found = audit(store, (DEFAULT_POLICY,), BASE + 5 * MIN)
    expected = [("t1/i1", State.RESUMED, "r1"), ("t1/i1@r2", State.WAITING, "r2")]

    assert expected == [(a.verdict.request_id, a.verdict.state, a.evidence.run_id) for a in found]


def test_evidence_by_thread_and_interrupt_names_the_most_recent_wait_of_that_id(
    store: Store,
) -> None:
    healthy_wait(store)
    ingest(
        store,
        run_input("r2", BASE + 3 * MIN, resolved("i1", True)),
        run_started("r2", BASE + 3 * MIN + 1000),
        announce("r2", BASE + 4 * MIN),
        decided("decline", BASE + 5 * MIN),
    )
    expected = {"t1/i1": State.RESUMED, "t1/i1@r2": State.CLOSED_BY_DECLINE}

    assert expected == verdicts(store, BASE + 6 * MIN)


def test_an_audit_leaves_out_the_threads_not_begun_and_keeps_every_other_verdict(
    store: Store,
) -> None:
    Ingest(store, PROTECT, Config()).body(
        "seed", (FIXTURES / "seed-audit.ndjson").read_bytes(), BASE
    )
    threads = store.threads()
    starts = sorted(min(i.at for i in t.interrupts) for t in threads)
    at = starts[len(starts) // 2]  # some threads begin after it, some at or before it

    every = [
        (w.evidence.request_id, w.verdict)
        for t in threads
        for w in evaluate(t, lambda a, r: DEFAULT_POLICY, at).waits
        if w.evidence.requested_at <= at
    ]
    audited = [
        (a.evidence.request_id, a.verdict) for a in classified(threads, (DEFAULT_POLICY,), at)
    ]

    assert starts[0] <= at < starts[-1]
    assert sorted(every, key=lambda p: p[0]) == sorted(audited, key=lambda p: p[0])
    assert audited
