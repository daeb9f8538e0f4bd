"""The JetStream consumer tells the truth about itself: idle fetches are not outages, a link
to NATS that stops forwarding (the shared NATS server keeps running) drops
sidewatch_jetstream_consuming to 0 and fails /readyz, both come back when the link does, and
the consumer's lag is on /metrics."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from tests.daemon.test_e2e import _series, _stop
from tests.daemon.test_e2e import _start as _serve
from tests.daemon.test_nats import Stream, _message, _publish, _units, stream  # noqa: F401
from tests.daemon.test_replicas import _wait_until
from tests.frozen import FrozenProxy


def _metrics(url: str) -> dict[str, float]:
    return _series(httpx.get(f"{url}/metrics", timeout=5).text)


def test_a_cut_link_to_nats_is_told_and_an_idle_one_is_not(
    tmp_path: Path,
    stream: Stream,  # noqa: F811
    db_url: str,
) -> None:
    proxy = FrozenProxy("127.0.0.1", 4222).start()
    server = _serve(
        tmp_path,
        db_url,
        extra=f"nats: {{url: 'nats://127.0.0.1:{proxy.port}', stream: {stream.name}, "
        f"subject: '{stream.subject}.>', batch: 8, ackWait: 2s, retryDelay: 300ms}}\n",
    )
    try:
        _publish(stream, *[_message(n) for n in range(3)])
        assert _wait_until(lambda: len(_units(db_url)) == 3, seconds=30)
        assert _wait_until(lambda: _metrics(server.url).get("sidewatch_jetstream_pending") == 0)
        time.sleep(7)  # a few idle fetches (2 s each)
        idle = server.log.read_text()
        assert _metrics(server.url)["sidewatch_jetstream_consuming"] == 1
        assert httpx.get(f"{server.url}/readyz", timeout=5).status_code == 200

        proxy.freeze()
        cut = time.monotonic()
        dropped = _wait_until(
            lambda: _metrics(server.url)["sidewatch_jetstream_consuming"] == 0, seconds=20
        )
        noticed = time.monotonic() - cut
        ready = httpx.get(f"{server.url}/readyz", timeout=5)

        proxy.thaw()
        back = _wait_until(
            lambda: _metrics(server.url)["sidewatch_jetstream_consuming"] == 1, seconds=30
        )
        _publish(stream, _message(3))
        landed = _wait_until(lambda: len(_units(db_url)) == 4, seconds=30)
        ready_again = httpx.get(f"{server.url}/readyz", timeout=5).status_code
    finally:
        _stop(server)
        proxy.close()

    assert "paused" not in idle  # an empty fetch is no outage
    assert dropped and noticed < 10
    assert ready.status_code == 503
    assert "JetStream consumer not consuming" in ready.json()["problems"]
    assert back and landed and ready_again == 200
