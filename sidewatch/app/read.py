"""Read: the waits in some states, and one wait with its evidence timeline and recorded
transitions, each evaluated at the `now` it is given (the read API's and the wait pages')."""

from __future__ import annotations

import base64
import binascii
import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from sidewatch.app.evaluate import evaluations
from sidewatch.core.engine import Evaluated
from sidewatch.core.model import (
    ActionChange,
    Decision,
    Heartbeat,
    Item,
    Receipt,
    Route,
    RunEvent,
    State,
    SubagentState,
    Verdict,
    WaitEvidence,
)
from sidewatch.core.policy import Policy
from sidewatch.report.verdicts import iso, verdict_json
from sidewatch.store.auditstate import AuditState, StoredState
from sidewatch.store.repo import Store
from sidewatch.store.waitlists import ListKey

log = logging.getLogger("sidewatch.http")


PolicyFor = Callable[[str | None, str | None], Policy]


class Read:
    """What the read API and the wait pages answer. `policy_for` chooses a wait's policy as
    the auditor does (a reload changes both); what the auditor last recorded is read from the
    store."""

    def __init__(self, store: Store, policy_for: PolicyFor) -> None:
        self.store = store
        self.recorded = AuditState(store.engine)
        self.policy_for = policy_for

    def waits(
        self, states: Collection[str], limit: int, now: int, cursor: str | None = None
    ) -> dict[str, Any]:
        """`GET /v1/waits`: the waits in `states` at `now`, longest in their state first, a
        page of `limit` after `cursor` (a `next` this list gave), with how many match
        (`total`) and the cursor of the next page (`next`, None on the last). Raises
        BadCursor for a cursor this list did not give."""
        chosen = frozenset(states)
        page = self.page(Filters(chosen), [chosen], limit, now, cursor, place=False)
        return {
            "evaluatedAt": iso(now),
            "total": page.total,
            "next": page.next,
            "waits": page.waits,
        }

    def page(
        self,
        filters: Filters,
        segments: Sequence[frozenset[str]],
        limit: int,
        now: int,
        cursor: str | None = None,
        place: bool = True,
    ) -> Page:
        """A page of the waits that match `filters` at `now`, `segments` (states listed
        together, each in the lists' order: longest in its state first) one after another,
        after or before `cursor`, with every state's count and the page's place (`start`;
        not counted without `place`: 0). Counts come from the store, made true at `now` for
        the waits that may have changed since they were recorded; what is read is the page,
        the counts and those waits, not the store."""
        return _page(
            self.store, self.recorded, self.policy_for, filters, segments, limit, now, cursor, place
        )

    def wait(self, request_id: str, now: int) -> dict[str, Any] | None:
        """One wait's verdict at `now`, its evidence timeline and its recorded transitions."""
        return _wait(self.store, self.recorded, self.policy_for, request_id, now)

    def pruned_before(self) -> int | None:
        """The cutoff before which closed waits were pruned (store.retention), None while
        nothing was: a wait not found may have been one of them."""
        return self.store.pruned_before()


class BadCursor(ValueError):
    """A cursor this list did not give (or gave for other filters)."""


@dataclass(frozen=True, slots=True)
class Filters:
    """Which waits a list shows: in `states`, of `policy` and `uncertain` (None: any)."""

    states: frozenset[str]
    policy: str | None = None
    uncertain: bool | None = None

    def match(self, state: str, policy: str, uncertain: bool) -> bool:
        return (
            state in self.states
            and self.policy in (None, policy)
            and self.uncertain in (None, uncertain)
        )


@dataclass(frozen=True, slots=True)
class Page:
    """A page of a list: its waits' bodies in order; `counts`: every state's waits at the
    time (no filter); `total`: the waits that match; `start`: how many of them come before
    the page's first; the cursors of the next and the previous page (None: none)."""

    waits: list[dict[str, Any]]
    counts: dict[str, int]
    total: int
    start: int
    next: str | None
    previous: str | None


@dataclass(slots=True)
class _Row:
    """A wait's row of a list: its place, state and thread, and its body (None: a recorded
    verdict, its body read once the page is chosen)."""

    key: ListKey
    state: str
    thread: str
    body: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class _Changed:
    """The waits whose verdict may have changed since it was recorded (on a thread with new
    evidence, or due by time), evaluated at the list's time: they replace their records in
    every count and page. `records`: the recorded verdicts they replace; `rows`: those that
    are listed now, each with its policy and `uncertain`."""

    records: dict[tuple[str, str], StoredState]
    rows: dict[tuple[str, str], tuple[_Row, str, bool]]


_EVERY = frozenset(s.value for s in State)
_Match = Callable[[str, str, bool, ListKey], bool]


def _page(
    store: Store,
    recorded: AuditState,
    policy_for: PolicyFor,
    filters: Filters,
    segments: Sequence[frozenset[str]],
    limit: int,
    now: int,
    cursor: str | None,
    place: bool,
) -> Page:
    segs = [seg & filters.states for seg in segments]
    segs = [seg for seg in segs if seg]
    at = None if cursor is None else _decode(cursor)
    here = 0
    if at is not None:
        here = next((j for j, seg in enumerate(segs) if at[1] in seg), -1)
        if here < 0:
            raise BadCursor(f"cursor is of a wait in {at[1]}, a state this list does not show")
    backward = at is not None and at[0]
    changed = _changed(store, recorded, policy_for, now)

    counts = _adjusted(recorded.counted(_EVERY), changed, lambda *_: True)
    if filters.policy is None and filters.uncertain is None:
        matching = counts
    else:
        stored = recorded.counted(
            filters.states, policy=filters.policy, uncertain=filters.uncertain
        )
        matching = _adjusted(stored, changed, lambda s, p, u, _: filters.match(s, p, u))
    total = sum(matching[s] for s in filters.states)

    rows: list[_Row] = []
    walk = range(here, -1, -1) if backward else range(here, len(segs))
    for j in walk:
        if not any(matching[s] for s in segs[j]):
            continue
        bound = at[2] if at is not None and j == here else None
        need = limit + 1 - len(rows)
        rows += _segment(recorded, changed, filters, segs[j], need, bound, backward)
        if len(rows) > limit:
            break
    more = len(rows) > limit
    rows = rows[:limit]
    if backward:
        rows.reverse()

    start = total if at is not None and not backward else 0
    if rows and place:
        first = rows[0]
        j = next(j for j, seg in enumerate(segs) if first.state in seg)
        seg = segs[j]
        stored = recorded.counted(
            seg, policy=filters.policy, uncertain=filters.uncertain, before=first.key
        )
        within = _adjusted(
            stored,
            changed,
            lambda s, p, u, k: s in seg and filters.match(s, p, u) and k < first.key,
        )
        start = sum(matching[s] for jj in range(j) for s in segs[jj]) + sum(within[s] for s in seg)
    if place:
        after = more if not backward else start + len(rows) < total
        before = more if backward else start > 0
    else:  # (the page's place not counted: what was walked from says it)
        after, before = (more, at is not None) if not backward else (True, more)
    return Page(
        waits=_bodies(store, policy_for, rows, now),
        counts=dict(counts),
        total=total,
        start=start,
        next=_encode(False, rows[-1]) if rows and after else None,
        previous=_encode(True, rows[0]) if rows and before else None,
    )


def _changed(store: Store, recorded: AuditState, policy_for: PolicyFor, now: int) -> _Changed:
    """The waits of the threads due or dirty, evaluated at `now` (a long thread from its
    checkpoint: the waits settled before its cut do not change, and keep their records)."""
    threads = set(recorded.due(now)) | {t for t, _ in recorded.dirty()}
    evaluated: list[tuple[str, str]] = []
    rows: dict[tuple[str, str], tuple[_Row, str, bool]] = {}
    # Read-only, as the GET of one wait: no checkpoint is chosen (keep=False).
    for o in evaluations(store, threads, policy_for, now=now, keep=False):
        if o.result is None:  # one thread that cannot be evaluated never fails the list
            log.error("thread %s could not be evaluated; left out", o.thread_id, exc_info=o.error)
            continue
        for w in o.result.waits:
            ev, v = w.evidence, w.verdict
            evaluated.append((o.thread_id, ev.request_id))
            if ev.requested_at > now:
                continue  # not requested yet at `now`
            body = _body(w)
            if body is None or v is None:
                continue
            row = _Row((v.since, ev.request_id, o.thread_id), v.state.value, o.thread_id, body)
            rows[(o.thread_id, ev.request_id)] = (row, v.policy, v.uncertain)
    return _Changed(recorded.records_of(evaluated), rows)


def _adjusted(stored: Mapping[str, int], changed: _Changed, match: _Match) -> Counter[str]:
    """Counts of recorded verdicts made true at the list's time: the changed waits that
    `match` counted as recorded, then as evaluated."""
    out = Counter(stored)
    for s in changed.records.values():
        if match(s.state, s.policy, bool(s.uncertain), (s.since, s.request_id, s.thread_id)):
            out[s.state] -= 1
    for row, policy, uncertain in changed.rows.values():
        if match(row.state, policy, uncertain, row.key):
            out[row.state] += 1
    return out


def _segment(
    recorded: AuditState,
    changed: _Changed,
    filters: Filters,
    states: frozenset[str],
    need: int,
    bound: ListKey | None,
    backward: bool,
) -> list[_Row]:
    """The first `need` rows of `states` beyond `bound`: recorded verdicts read along the
    index (as many more as the changed waits could take out), merged with the changed waits
    evaluated now."""
    replaced = sum(1 for s in changed.records.values() if s.state in states)
    stored = recorded.listed(
        states,
        need + replaced,
        after=bound,
        backward=backward,
        policy=filters.policy,
        uncertain=filters.uncertain,
    )
    rows = [
        _Row((s.since, s.request_id, s.thread_id), s.state, s.thread_id, None)
        for s in stored
        if (s.thread_id, s.request_id) not in changed.records
    ]
    for row, policy, uncertain in changed.rows.values():
        beyond = bound is None or (row.key < bound if backward else row.key > bound)
        if beyond and row.state in states and filters.match(row.state, policy, uncertain):
            rows.append(row)
    rows.sort(key=lambda r: r.key, reverse=backward)
    return rows[:need]


def _bodies(
    store: Store, policy_for: PolicyFor, rows: list[_Row], now: int
) -> list[dict[str, Any]]:
    """The page's bodies: a recorded verdict's from its thread evaluated at `now` (a long
    one from its checkpoint; a wait settled before the cut from what was kept of it)."""
    want: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        if r.body is None:
            want[r.thread].add(r.key[1])
    found: dict[tuple[str, str], Evaluated] = {}
    if want:
        for o in evaluations(store, want.keys(), policy_for, now=now, keep=False, want=want):
            if o.result is None:
                log.error(
                    "thread %s could not be evaluated; left out", o.thread_id, exc_info=o.error
                )
                continue
            for w in (*o.result.waits, *o.settled.values()):
                if w.evidence.request_id in want[o.thread_id]:
                    found[(o.thread_id, w.evidence.request_id)] = w
    out = []
    for r in rows:
        body = r.body
        if body is None:
            got = found.get((r.thread, r.key[1]))
            body = None if got is None else _body(got)
            if body is not None and body["state"] != r.state:
                # Shown as it is now; counted as recorded until the auditor records it.
                log.warning(
                    "wait %s is %s at %s, recorded %s and not due",
                    r.key[1],
                    body["state"],
                    now,
                    r.state,
                )
        if body is not None:
            out.append(body)
    return out


def _body(w: Evaluated) -> dict[str, Any] | None:
    """`w`'s row of a list, None (logged) when it cannot be shown."""
    ev, v = w.evidence, w.verdict
    try:
        if v is None:
            raise w.error or ValueError("no verdict")
        return verdict_json(ev, v)
    except Exception:  # one wait that cannot be shown never fails the list
        log.exception("wait %s could not be listed; left out", ev.request_id)
        return None


_CURSOR_CHARS = 4096
_BAD_CURSOR = "cursor is not one this list gave: pass the `next` of the page before as it is"


def _encode(backward: bool, row: _Row) -> str:
    """An opaque cursor: the place of `row` in the list, to read after (or before) it."""
    raw = orjson.dumps(["b" if backward else "a", row.state, *row.key])
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _decode(cursor: str) -> tuple[bool, str, ListKey]:
    try:
        if len(cursor) > _CURSOR_CHARS:
            raise ValueError
        raw = base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True)
        way, state, since, rid, thread = orjson.loads(raw)
        if (
            way not in ("a", "b")
            or state not in _EVERY
            or type(since) is not int
            or not -(2**63) <= since < 2**63
            or not isinstance(rid, str)
            or not isinstance(thread, str)
            or "\x00" in rid + thread
        ):
            raise ValueError
    except (ValueError, TypeError, binascii.Error):
        raise BadCursor(_BAD_CURSOR) from None
    return way == "b", state, (since, rid, thread)


def _wait(
    store: Store, recorded: AuditState, policy_for: PolicyFor, request_id: str, now: int
) -> dict[str, Any] | None:
    # Looked up, never parsed: ids may hold `/` and `@`.
    # A long thread from its checkpoint, when the wait is after its cut (app.evaluate);
    # one settled before it is read back from what was kept of it, while the checkpoint holds.
    threads = store.threads_of(request_id)
    want = {thread: {request_id} for thread in threads}
    for out in evaluations(store, threads, policy_for, now, keep=False, want=want):
        if out.result is None:
            raise out.error or ValueError("not evaluated")
        found = out.settled.get(request_id)
        waits = out.result.waits if found is None else (found,)
        body = None
        for w in waits:
            ev, v = w.evidence, w.verdict
            if ev.request_id != request_id:
                continue
            if v is None:
                raise w.error or ValueError("no verdict")
            body = settled_body(ev, v)
            break
        if body is None:
            continue
        timeline = body.pop("timeline")
        body["evaluatedAt"] = iso(now)
        body["timeline"] = timeline
        body["transitions"] = [
            {
                "from": t.from_state,
                "to": t.to_state,
                "at": iso(t.at),
                "recordedAt": iso(t.recorded_at),
            }
            for t in recorded.transitions_of(request_id)
        ]
        return body
    return None


def settled_body(ev: WaitEvidence, v: Verdict) -> dict[str, Any]:
    """What `GET /v1/waits/{requestId}` shows of a wait but `evaluatedAt` and `transitions`
    (added at read time): its verdict and its timeline."""
    return {**verdict_json(ev, v), "timeline": _timeline(ev)}


def _timeline(ev: WaitEvidence) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {
            "at": iso(ev.requested_at),
            "kind": "requested",
            "runId": ev.run_id,
            "expiresAt": iso(ev.expires_at),
            "actionDigest": ev.digest,
        }
    ]
    steps: list[tuple[int, int, dict[str, Any]]] = [
        (item.at, item.seq, _describe(item)) for item in ev.items
    ]
    if ev.subagent is not None:  # the subagent that raised the wait: evidence only
        steps += [
            (
                s.at,
                s.seq,
                {
                    "kind": _SUBAGENT_KINDS[s.state],
                    "subagentRunId": ev.subagent.run_id,
                    "runId": s.run_id,
                },
            )
            for s in ev.subagent.steps
        ]
    for at, _, described in sorted(steps, key=lambda s: (s[0], s[1])):
        out.append({"at": iso(at), **described})
    return out


_SUBAGENT_KINDS = {
    SubagentState.RUNNING: "subagent_started",
    SubagentState.SUSPENDED: "subagent_suspended",
    SubagentState.FINISHED: "subagent_finished",
    SubagentState.ERROR: "subagent_error",
}


def _describe(item: Item) -> dict[str, Any]:
    if isinstance(item, Route):
        return {
            "kind": "route",
            "approverRef": item.approver_ref,
            "channel": item.channel,
            "delivered": item.delivered,
            "acknowledged": item.acknowledged,
        }
    if isinstance(item, Decision):
        return {
            "kind": "decision",
            "decision": item.code.value,
            "runId": item.run_id,
            "actionDigest": item.digest,
            "uncertain": item.uncertain,
            "edited": item.edited,
        }
    if isinstance(item, ActionChange):
        return {"kind": "action", "actionDigest": item.digest}
    if isinstance(item, Heartbeat):
        if item.last_at is None or item.beats == 1:
            return {"kind": "heartbeat", "resumeHandle": item.handle}
        # A compacted span: one item, its beats counted, its first (`at`) and last beat.
        span = {"lastAt": iso(item.last_at), "beats": item.beats}
        return {"kind": "heartbeat", "resumeHandle": item.handle, **span}
    if isinstance(item, Receipt):
        return {"kind": "receipt"}
    assert isinstance(item, RunEvent)
    return {"kind": f"run_{item.step.value}", "runId": item.run_id}
