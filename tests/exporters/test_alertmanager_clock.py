"""The Alertmanager push across a clock that jumped ahead and came back, against a real
Alertmanager (it judges by its own, true clock) and a local receiver: a resolution never ends
before it starts, and an alert sent by the clock ahead is corrected once the pushes are at the
true time, whether its wait still fires or not."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from sidewatch.app.audit import Auditor, push_problems
from sidewatch.config import Config
from sidewatch.exporters.alertmanager import AlertmanagerPush, ProblemWait
from sidewatch.store.repo import Store
from tests.app.test_auditor import asked, heartbeat, ingest
from tests.exporters.test_alertmanager import Receiver, _active, _alertmanager

SEC, MIN, HOUR = 1000, 60_000, 3_600_000
JUMP = 2 * HOUR
RESEND = 60_000
POLICIES = Config().policies
EXPORT = "t-export/i-export"


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[str]:
    yield from _alertmanager(tmp_path, "")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.server.shutdown()
    r.server.server_close()


def _ms(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp() * 1000)


def _alert(url: str, request_id: str) -> dict[str, str] | None:
    """Alertmanager's own view of the alert: state, startsAt, endsAt."""
    for a in httpx.get(f"{url}/api/v2/alerts").json():
        if a["labels"].get("requestId") == request_id:
            return {"state": a["status"]["state"], "startsAt": a["startsAt"], "endsAt": a["endsAt"]}
    return None


def test_a_wait_orphaned_by_a_clock_ahead_is_resolved_in_alertmanager_once_the_clock_is_back(
    open_stores: Callable[[], Store], alertmanager: str
) -> None:
    """The store's verdict, the snapshot and the page agree again: the resolve Alertmanager
    refused (it ended before the start a clock two hours ahead gave it) is taken."""
    store = open_stores()
    now = int(time.time()) * SEC  # Alertmanager's clock: the true time
    t = now - 5 * MIN
    auditor = Auditor(store, POLICIES)
    push = AlertmanagerPush(alertmanager, RESEND)
    ingest(store, [*asked("t-export", "export_dataset", t), heartbeat("t-export", t + 2 * MIN)], t)
    auditor.tick(t + 3 * MIN)
    auditor.tick(now + JUMP)  # ORPHANED since t + 12 min: ahead of Alertmanager's clock
    push_problems(auditor, push, now + JUMP)
    paged = _alert(alertmanager, EXPORT)

    auditor.tick(now)
    resolved = push_problems(auditor, push, now)

    assert paged is not None and "active" == paged["state"]
    assert _ms(paged["startsAt"]) > now  # what the clock ahead made of it
    assert (1, 0) == (resolved, push.failures)
    assert EXPORT not in _active(alertmanager)
    assert {"t-export/i-export": "WAITING"} == {
        r: s.state for r, s in auditor.state.states(["t-export"]).items()
    }


def test_an_alert_sent_by_a_clock_ahead_that_still_fires_gets_its_true_start_and_end(
    alertmanager: str,
) -> None:
    """Sent two hours ahead, its end is two hours ahead too: a resend alone would not move it
    (Alertmanager keeps the later end of two overlapping sends), so it is resolved and sent
    afresh in one push, and stays active throughout."""
    now = int(time.time()) * SEC
    since = now - 10 * MIN  # UNROUTABLE by the evidence, ten minutes ago
    wait = ProblemWait(EXPORT, "UNROUTABLE", "policy_owner", "default", since, "", "{}", "{}")
    push = AlertmanagerPush(alertmanager, RESEND)
    push.push([wait], now + JUMP)
    ahead = _alert(alertmanager, EXPORT)

    sent = push.push([wait], now)
    after = _alert(alertmanager, EXPORT)

    assert ahead is not None and _ms(ahead["endsAt"]) > now + JUMP
    assert 2 == sent  # the resolution, then the alert afresh
    assert after is not None
    assert ("active", since) == (after["state"], _ms(after["startsAt"]))
    assert _ms(after["endsAt"]) <= now + 3 * RESEND


def test_a_resolution_never_ends_before_it_starts(receiver: Receiver) -> None:
    now = 1_785_083_400_000
    push = AlertmanagerPush(receiver.url, RESEND)
    ahead = ProblemWait(EXPORT, "ORPHANED", "runtime_owner", "default", now + HOUR, "", "{}", "{}")
    push.push([ahead], now + JUMP)

    push.push([], now)

    [resolution] = receiver.pushes[-1]
    assert _ms(resolution["startsAt"]) <= _ms(resolution["endsAt"]) == now


def test_a_back_off_set_by_a_clock_ahead_does_not_hold_the_pushes_once_it_is_back(
    receiver: Receiver,
) -> None:
    now = 1_785_083_400_000
    wait = ProblemWait(EXPORT, "ORPHANED", "runtime_owner", "default", now - HOUR, "", "{}", "{}")
    push = AlertmanagerPush(receiver.url, RESEND)
    receiver.status = 500
    push.push([wait], now + JUMP)  # fails: no push before two hours and ten seconds ahead
    receiver.status = 200

    sent = push.push([wait], now)

    assert (1, 1) == (sent, push.failures)
    assert EXPORT in push.active
