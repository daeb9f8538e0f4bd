"""What a tick records of a wait's verdict: its state as stored, and the transitions since the
state recorded before, each at the time the evidence made it true, with the thresholds and
evidence it rests on (store.auditstate)."""

from __future__ import annotations

from functools import lru_cache

import orjson

from sidewatch.core.model import State, Thresholds, Verdict, WaitEvidence, unreported_label
from sidewatch.report.verdicts import evidence_json, iso, thresholds_of
from sidewatch.store.auditstate import StoredState
from sidewatch.store.transitions import StoredTransition

# A verdict evaluated more than this after a tick's time was evaluated by a clock that has
# gone back since (jumped ahead, then set right): its thread is evaluated again, and what it
# records says it was a correction (docs/internals/interpretations/clock-jumps.md).
CLOCK_MARGIN_MS = 60_000


def _next_item(ev: WaitEvidence, now: int) -> int | None:
    """The earliest stored evidence dated after `now` (a source whose clock runs ahead):
    the wait is due again then, as for a time-driven change."""
    later = [item.at for item in ev.items if item.at > now]
    return min(later) if later else None


def stored_state(ev: WaitEvidence, v: Verdict, now: int) -> StoredState:
    """The wait's verdict at `now` as the store records it (wait_state): due again at its
    next time-driven change, or at evidence dated after `now`, whichever comes first."""
    next_item = _next_item(ev, now)
    return StoredState(
        request_id=ev.request_id,
        thread_id=ev.thread_id,
        policy=v.policy,
        state=_VALUE[v.state],
        closed=v.closed,
        since=v.since,
        due_at=min((t for t in (v.due_at, next_item) if t is not None), default=None),
        requested_at=ev.requested_at,
        decided_at=v.facts.decided_at,
        receipt_at=v.facts.receipt_at,
        evaluated_at=now,
        unreported=unreported_label(v.unreported),
        uncertain=v.uncertain,
    )


def transitions(
    ev: WaitEvidence, v: Verdict, old: StoredState | None, now: int
) -> list[StoredTransition]:
    """The transitions to store for `v`: they share its thresholds and evidence (serialized
    once, stored once: store.auditstate.compact)."""
    changes = _changes(old, v)
    if not changes:
        return []
    thresholds = _thresholds_text(v.thresholds)
    shown = evidence_json(v)
    if old is not None and old.evaluated_at > now + CLOCK_MARGIN_MS:
        # The state it replaces was evaluated by a clock that has gone back since: not a
        # change by the evidence, and the record says so
        # (docs/internals/interpretations/clock-jumps.md).
        shown["correction"] = {
            "reason": "clock_went_back",
            "state": old.state,
            "evaluatedAt": iso(old.evaluated_at),
        }
    evidence = orjson.dumps(shown).decode()
    rid, thread, policy = ev.request_id, ev.thread_id, v.policy
    return [
        StoredTransition(rid, thread, frm, to, at, now, policy, thresholds, evidence)
        for frm, to, at in changes
    ]


@lru_cache(maxsize=256)
def _thresholds_text(th: Thresholds) -> str:
    """A policy's thresholds as stored (one per policy: serialized once, not per verdict)."""
    return orjson.dumps(thresholds_of(th)).decode()


def _changes(old: StoredState | None, v: Verdict) -> list[tuple[str | None, str, int]]:
    """The transitions to record: the verdict's history after what was recorded before."""
    if old is None:
        return [(_FROM[t.from_state], _VALUE[t.to_state], t.at) for t in v.transitions]
    state = _VALUE[v.state]
    if old.state == state and old.since == v.since:
        return []
    prev: str = old.state
    out: list[tuple[str | None, str, int]] = []
    for t in v.transitions:
        to = _VALUE[t.to_state]
        if t.at > old.since and to != prev:
            out.append((prev, to, t.at))
            prev = to
    if prev != state:
        out.append((prev, state, v.since))
    return out


# A state's stored text by the state (None: no state yet): a lookup, where `.value` is a
# descriptor call, several times per wait in a full audit.
_VALUE: dict[State, str] = {s: s.value for s in State}
_FROM: dict[State | None, str | None] = {None: None, **{s: s.value for s in State}}
