"""A settled wait kept without its heartbeats, and given them back as they are when read.

A closed wait's state, since, transitions and findings rest on no heartbeat, but its
timeline, `lastHeartbeatAt`, `resumeHandle` and `missing` follow the beats that reach it,
and those move after it settled: the engine feeds every thread-wide beat to every wait, a
closed one too; a stored span of beats grows in place; a service bound later to its thread
or run beats for it. So a settled wait is kept as its evidence without heartbeat items
(`kept`), and read back with the beats that reach it now (`restored`), chosen and ordered as
the engine feeds them (core.engine: every thread-wide beat, every beat of the run that
announced it first, and those of a run that announced it again from that announcement on,
with the spans that go on past it counting from it). Classifying the result gives what
evaluating the whole thread gives (tests/core/test_checkpoint.py). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from sidewatch.core.engine import Evaluated, heartbeat_item
from sidewatch.core.facts import HeartbeatFact
from sidewatch.core.model import Decision, Heartbeat, Item, RunEvent, WaitEvidence

# Where an item stands among those of one instant (same at and seq), as the engine feeds
# them (core.engine `_instant`): a span carried over to a run announcing the wait again
# (fed as it announces), evidence events and answers, heartbeats, run steps and tool
# results, then answers matched by the lone-answer rule.
_CARRIED, _EVIDENCE, _BEAT, _RUN, _LONE = range(5)


@dataclass(frozen=True, slots=True)
class Kept:
    """What is kept of a settled wait: its evidence without heartbeat items, and the later
    runs that announced it again with the (at, seq) they did (Evaluated.again)."""

    evidence: WaitEvidence
    again: tuple[tuple[str, int, int], ...] = ()

    @property
    def runs(self) -> frozenset[str]:
        """The runs whose beats may reach it (with the thread-wide ones)."""
        return frozenset((self.evidence.run_id, *(r for r, _, _ in self.again)))


def kept(w: Evaluated) -> Kept:
    """`w` as kept once settled: its heartbeat items left out."""
    ev = w.evidence
    items = tuple(i for i in ev.items if not isinstance(i, Heartbeat))
    return Kept(replace(ev, items=items), w.again)


def restored(k: Kept, heartbeats: Iterable[HeartbeatFact]) -> WaitEvidence:
    """The kept wait's evidence with the beats among `heartbeats` (the thread's, in the
    order the store loads them) that reach it, where the engine puts them."""
    ev = k.evidence
    since = {run: (at, seq) for run, at, seq in k.again}
    beats: list[tuple[tuple[int, ...], Item]] = []
    for n, h in enumerate(heartbeats):
        if h.run_id is None or h.run_id == ev.run_id:
            beats.append(((h.at, h.seq, _BEAT, h.at, h.seq, n), heartbeat_item(h)))
            continue
        key = since.get(h.run_id)
        if key is None:
            continue  # another run's: none of this wait's
        if (h.at, h.seq) >= key:  # after the run announced it again: fed as it comes
            beats.append(((h.at, h.seq, _BEAT, h.at, h.seq, n), heartbeat_item(h)))
        elif h.last_at is not None and h.last_at > key[0]:
            # A span going on past that announcement counts from it on.
            item = replace(heartbeat_item(h), at=key[0], seq=key[1])
            beats.append(((key[0], key[1], _CARRIED, h.at, h.seq, n), item))
    if not beats:
        return ev
    ranked: list[tuple[tuple[int, ...], Item]] = [((i.at, i.seq, _rank(i)), i) for i in ev.items]
    ranked += beats
    ranked.sort(key=lambda r: r[0])  # stable: the kept items keep their order
    return replace(ev, items=tuple(i for _, i in ranked))


def _rank(item: Item) -> int:
    if isinstance(item, RunEvent):
        return _RUN
    if isinstance(item, Decision) and item.uncertain:
        return _LONE
    return _EVIDENCE
