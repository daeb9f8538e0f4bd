"""A thread's waits with their evidence timelines, for callers that need no verdict: read
from the engine's one pass (`core/engine.py`), which owns identity and matching."""

from __future__ import annotations

from dataclasses import dataclass

from sidewatch.core.engine import PolicyFor, evaluate
from sidewatch.core.facts import FindingFact, ThreadFacts
from sidewatch.core.model import WaitEvidence

_NEVER = 2**62  # a `now` after every fact: the timelines do not depend on it


@dataclass(frozen=True, slots=True)
class ThreadWaits:
    """A thread's waits with their evidence, and the findings about no single wait."""

    waits: tuple[WaitEvidence, ...]
    findings: tuple[FindingFact, ...]  # noticed on the thread, about no single wait


def assemble(facts: ThreadFacts, policy_for: PolicyFor) -> ThreadWaits:
    """Every wait of the thread with its timeline, in the order the waits were announced."""
    result = evaluate(facts, policy_for, _NEVER)
    return ThreadWaits(tuple(w.evidence for w in result.waits), result.findings)
