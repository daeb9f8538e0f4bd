"""An input with no `timestamp` posted in one unit and its run's `RUN_STARTED` in a later one
(pydantic-ai stamps its events, not the input it was posted): the stored input takes the run's
start time in the `RUN_STARTED` unit's transaction (ingest/untimed.py, store/retime.py), in a
batch, on a delivery again, and not after the daemon lost its memory."""

from __future__ import annotations

import re
from collections.abc import Iterator

import orjson
import pytest
from sqlalchemy import Engine

from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.core.facts import RunMark
from sidewatch.store.db import open_store
from sidewatch.store.models import SettledWait, ThreadCheckpoint
from sidewatch.store.repo import Store
from tests.ingest.producers.captures import capture

CONFIG = Config()
THREAD = "thread-pydantic-ai-approve"
LINES = capture("pydantic-ai-approve").splitlines()
# The second run: its input (answering the first run's wait, no time), then its RUN_STARTED.
INPUT = next(i for i, line in enumerate(LINES) if b'"runId":"run-2"' in line)
STAMP = int(re.search(rb'"timestamp":(\d+)', LINES[INPUT + 1]).group(1))  # type: ignore[union-attr]
RECEIVED = STAMP + 60_000


def unit(lines: list[bytes]) -> bytes:
    return b"\n".join(lines) + b"\n"


FIRST = unit(LINES[:INPUT])  # the first run, whole
ALONE = unit(LINES[INPUT : INPUT + 1])  # the untimed input alone
REST = unit(LINES[INPUT + 1 :])  # its run from RUN_STARTED on


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    engine = open_store(db_url)
    yield engine
    engine.dispose()


def ingest(engine: Engine) -> Ingest:
    return Ingest(Store(engine), ref_protector(engine, CONFIG), CONFIG)


def input_times(engine: Engine) -> tuple[list[int], list[int]]:
    """(the answers' times, the second run's input mark's times) as stored."""
    (thread,) = Store(engine).threads([THREAD])
    marks = [r.at for r in thread.runs if r.run_id == "run-2" and r.mark == RunMark.INPUT]
    return [a.at for a in thread.answers], marks


def early(engine: Engine) -> int | None:
    with engine.connect() as conn:
        row = conn.exec_driver_sql(
            "SELECT early FROM dirty_thread WHERE thread_id = '" + THREAD + "'"
        ).first()
    return None if row is None else int(row[0])


def test_the_stored_input_takes_its_run_start_time_from_a_later_unit(engine: Engine) -> None:
    feed = ingest(engine)
    feed.body("producer", FIRST, RECEIVED)
    feed.body("producer", ALONE, RECEIVED)
    assert ([RECEIVED], [RECEIVED]) == input_times(engine)  # provisional until its run starts
    with engine.begin() as conn:  # the auditor read what came so far
        conn.exec_driver_sql("DELETE FROM dirty_thread")

    feed.body("producer", REST, RECEIVED + 5_000)

    assert ([STAMP], [STAMP]) == input_times(engine)
    assert STAMP == early(engine)  # the auditor looks again from the new time
    assert 0 == len(feed.open_runs)  # nothing held once the run started


def test_a_batch_retimes_an_input_stored_by_an_earlier_unit_of_it(engine: Engine) -> None:
    feed = ingest(engine)
    feed.units([feed.read("nats", body, RECEIVED) for body in (FIRST, ALONE, REST)])

    assert ([STAMP], [STAMP]) == input_times(engine)
    assert 0 == len(feed.open_runs)


def test_an_input_delivered_again_keeps_the_first_facts_and_they_are_retimed(
    engine: Engine,
) -> None:
    feed = ingest(engine)
    feed.body("producer", FIRST, RECEIVED)
    feed.body("producer", ALONE, RECEIVED)
    again = feed.body("producer", ALONE, RECEIVED + 1_000)  # stores nothing new
    assert again.redelivered

    feed.body("producer", REST, RECEIVED + 5_000)
    feed.body("producer", ALONE, RECEIVED + 9_000)  # after the retime: changes nothing
    feed.body("producer", REST, RECEIVED + 9_000)

    assert ([STAMP], [STAMP]) == input_times(engine)


def test_a_daemon_that_lost_its_memory_leaves_the_ingest_time(engine: Engine) -> None:
    """Held in memory only (no schema of its own): a restart between the two units, or a
    stop that closed what was held, leaves the input's facts at their ingest time."""
    feed = ingest(engine)
    feed.body("producer", FIRST, RECEIVED)
    feed.body("producer", ALONE, RECEIVED)
    assert 1 == len(feed.open_runs)
    feed.close_held("stop", RECEIVED)  # the daemon stopping
    assert 0 == len(feed.open_runs)

    ingest(engine).body("producer", REST, RECEIVED + 5_000)  # the daemon started again

    assert ([RECEIVED], [RECEIVED]) == input_times(engine)


def test_a_run_start_without_a_time_leaves_the_ingest_time(engine: Engine) -> None:
    feed = ingest(engine)
    feed.body("producer", FIRST, RECEIVED)
    feed.body("producer", ALONE, RECEIVED)
    untimed = re.sub(rb'"timestamp":\d+,', b"", LINES[INPUT + 1])

    feed.body("producer", unit([untimed]), RECEIVED + 5_000)

    assert ([RECEIVED], [RECEIVED]) == input_times(engine)
    assert 0 == len(feed.open_runs)


@pytest.mark.parametrize(("cut", "kept"), [(RECEIVED + 1, False), (STAMP, True)])
def test_a_checkpoint_whose_prefix_the_move_touches_is_dropped(
    engine: Engine, cut: int, kept: bool
) -> None:
    """A fact moved within a checkpoint's prefix changes no count a dirty mark tells: the
    checkpoint (and what it kept of its settled waits) goes, and the thread is evaluated whole.
    One the move does not reach stays."""
    feed = ingest(engine)
    feed.body("producer", FIRST, RECEIVED)
    feed.body("producer", ALONE, RECEIVED)
    with engine.begin() as conn:
        conn.execute(
            ThreadCheckpoint.insert().values(thread_id=THREAD, cut=cut, count=1, dangling="[]")
        )
        conn.execute(
            SettledWait.insert().values(thread_id=THREAD, request_id="r", at=cut, evidence=b"")
        )

    feed.body("producer", REST, RECEIVED + 5_000)

    with engine.connect() as conn:
        left = [
            conn.exec_driver_sql(f"SELECT count(*) FROM {table}").scalar()
            for table in ("thread_checkpoint", "settled_wait")
        ]
    assert ([1, 1] if kept else [0, 0]) == left


def test_an_input_echoed_by_an_untimed_run_start_is_not_remembered(engine: Engine) -> None:
    """Its run started on that very line: no later `RUN_STARTED` will time it."""
    feed = ingest(engine)
    echoed = (
        b'{"type":"RUN_STARTED","threadId":"t-echo","runId":"r-1","input":'
        b'{"threadId":"t-echo","runId":"r-1","state":{},"messages":[],"tools":[],'
        b'"context":[],"forwardedProps":{}}}\n'
    )

    assert () == feed.body("producer", echoed, RECEIVED).rejects
    assert 0 == len(feed.open_runs)


def test_every_fact_of_the_input_line_moves_its_finding_and_trace_context_too(
    engine: Engine,
) -> None:
    """The line's finding (here: a malformed `tracestate`) and its trace context take the
    start time with its answer and mark: each is found by the line's thread, run, seq and
    stored time."""
    line = orjson.loads(LINES[INPUT])
    line |= {"traceparent": f"00-{'ab' * 16}-{'cd' * 8}-01", "tracestate": "no equals sign"}
    feed = ingest(engine)
    feed.body("producer", FIRST, RECEIVED)
    feed.body("producer", unit([orjson.dumps(line)]), RECEIVED)

    feed.body("producer", REST, RECEIVED + 5_000)

    with engine.connect() as conn:
        finding = conn.exec_driver_sql(
            "SELECT at FROM finding WHERE rule = 'trace_context_malformed'"
        ).scalar_one()
        trace = conn.exec_driver_sql("SELECT at FROM run_trace").scalar_one()
    assert ([STAMP], [STAMP]) == input_times(engine)
    assert (STAMP, STAMP) == (int(finding), int(trace))
