"""A lease holder paused with SIGSTOP past its lease (a frozen VM, a long GC) while another
replica takes over: when it comes back, only the current, verified term exports the
store-wide families, so their sum over the replicas never exceeds the truth. Two real
`sidewatch serve` processes on the running PostgreSQL server."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import httpx

from tests.daemon.test_e2e import Server, _audited, _seed_relative_to_now, _series, _start, _stop
from tests.daemon.test_replicas import _holders, _wait_until

INTERVAL_S = 2  # the lease: held 2.5 s past a renewal, claimed every 1 s


def _waits(server: Server) -> float | None:
    """The sum of sidewatch_waits this replica exports (0: none), or None: no answer."""
    try:
        text = httpx.get(f"{server.url}/metrics", timeout=2).text
    except httpx.TransportError:
        return None
    return sum(v for k, v in _series(text).items() if k.startswith("sidewatch_waits{"))


def test_a_holder_paused_past_its_lease_never_exports_beside_the_new_holder(
    tmp_path: Path, pg_url: str
) -> None:
    replicas = [_start(tmp_path, pg_url, f"{INTERVAL_S}s") for _ in range(2)]
    try:
        [holder] = _wait_until(lambda: _holders(replicas))
        [other] = [s for s in replicas if s is not holder]
        seed, _ = _seed_relative_to_now()
        posted = httpx.post(
            f"{other.url}/v1/events", content=seed, headers={"content-type": "application/x-ndjson"}
        ).status_code
        audited = _wait_until(lambda: _audited(holder, 6))
        truth = _waits(holder)

        holder.proc.send_signal(signal.SIGSTOP)
        stopped = time.monotonic()
        taken = _wait_until(lambda: _holders([other]) and (_waits(other) or 0) > 0, seconds=15)
        time.sleep(max(0.0, stopped + 4 * INTERVAL_S - time.monotonic()))  # well past the lease
        holder.proc.send_signal(signal.SIGCONT)

        sums: list[float] = []
        old: list[float] = []
        deadline = time.monotonic() + 6 * INTERVAL_S
        while time.monotonic() < deadline:
            a, b = _waits(holder), _waits(other)
            if a is not None and b is not None:
                sums.append(a + b)
                old.append(a)
        still_exported = _waits(other)
    finally:
        for s in replicas:
            if s.proc.poll() is None:
                s.proc.send_signal(signal.SIGCONT)
                _stop(s)

    assert (200, True) == (posted, bool(audited))
    assert truth is not None and truth > 0
    assert taken
    assert len(sums) >= 3  # both answered, again and again
    assert max(sums) <= truth, f"the sum of sidewatch_waits reached {max(sums)} (truth {truth})"
    assert set(old) == {0.0}  # the paused holder exported none after it came back
    assert truth == still_exported
