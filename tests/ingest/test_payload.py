"""Payload → decision (spec/input.md): decision words, labels made of words, a policy's own
labels, and `editedArgs`."""

from __future__ import annotations

from typing import Any

import pytest

from sidewatch.core.model import Code
from sidewatch.ingest.payload import Decision, decision_of

ACCEPT, DECLINE = Code.ACCEPT, Code.DECLINE

READINGS: list[tuple[Any, Code]] = [
    (True, ACCEPT),
    (False, DECLINE),
    ({"approved": False}, DECLINE),
    ({"confirmed": False}, DECLINE),
    ({"accepted": False}, DECLINE),  # Agent Framework's documented alias of `approved`
    ({"accepted": True}, ACCEPT),
    ("approved", ACCEPT),
    ("rejected", DECLINE),  # CrewAI's bare string label
    (" Rejected ", DECLINE),
    ("no", DECLINE),
    ("ok", ACCEPT),
    ("disallow", DECLINE),
    ("purge_refused", DECLINE),  # a step's own outcome name
    ("purgeRefused", DECLINE),
    ("purge-approved", ACCEPT),
    ("deploy.allowed", ACCEPT),
    ("approved_then_denied", DECLINE),  # decline words win
    ("no_preference", ACCEPT),  # yes/ok/no count only as whole answers
    ("no preference", ACCEPT),  # free text is an answer, not a decision word
    ("I refuse to say", ACCEPT),
    ({"outcome": "purge_refused"}, DECLINE),
    ({"decision": "deny"}, DECLINE),
    ({"type": "refused"}, DECLINE),
    ({"decisions": [{"type": "approve"}, {"type": "reject"}]}, DECLINE),
    ({"decisions": [{"type": "approve"}, {"type": "edit_refused"}]}, DECLINE),
    ({"note": "sure"}, ACCEPT),
]


@pytest.mark.parametrize(("payload", "expected"), READINGS, ids=[repr(p) for p, _ in READINGS])
def test_a_payload_reads_as_the_decision_its_words_say(payload: Any, expected: Code) -> None:
    assert expected == decision_of(payload).code


LABELS = {"purge_kept": DECLINE, "go": ACCEPT, "purge_refused": ACCEPT}


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ("purge_kept", DECLINE),
        ("GO ", ACCEPT),
        ("purge_refused", ACCEPT),
        ({"outcome": "go"}, ACCEPT),
    ],
)
def test_a_policy_label_wins_over_the_default_reading(payload: Any, expected: Code) -> None:
    assert expected == decision_of(payload, LABELS).code


def test_an_accept_with_edited_arguments_approves_an_edited_action() -> None:
    got = decision_of({"approved": True, "editedArgs": {"path": "/tmp/other.txt"}})

    assert Decision(ACCEPT, None, edited=True) == got


def test_a_decline_with_edited_arguments_is_a_plain_decline() -> None:
    got = decision_of({"approved": False, "editedArgs": {"path": "/tmp/other.txt"}})

    assert Decision(DECLINE) == got
