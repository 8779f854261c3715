"""BullMQ's worker as wbsync bounds it: what it remembers of the fetches it gave up on, and the
next job a run's end takes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from tests.support.waiting import wait_for
from wbsync.errors import JobLockLostError
from wbsync.jobs.bullmq_worker import GIVEN_UP_KEPT, BullmqWorker
from wbsync.jobs.handle import JobHandle
from wbsync.jobs.queue import SyncQueue
from wbsync.jobs.worker import SyncWorker
from wbsync.redis import keys, redis_bounds
from wbsync.system import clock

Make = Callable[[int], BullmqWorker]


async def _never(job: Any, token: str) -> None:
    raise AssertionError("the worker does not run")


@pytest.fixture
async def make(redis_url: str, prefix: str) -> AsyncIterator[Make]:
    made: list[BullmqWorker] = []

    def build(lock_ms: int) -> BullmqWorker:
        options = {
            "connection": redis_bounds.connect(redis_url),
            "prefix": f"{prefix}:q",
            "autorun": False,  # never fetches: only what it remembers is looked at
            "lockDuration": lock_ms,
        }
        name = keys.bullmq_queue_name("qgiven")
        made.append(BullmqWorker(name, _never, options, connection_name=f"{prefix}:given"))
        return made[-1]

    try:
        yield build
    finally:
        for worker in made:
            await worker.close()


async def test_fetches_given_up_on_are_remembered_up_to_the_bound_newest_first(
    make: Make,
) -> None:
    """Past ``GIVEN_UP_KEPT`` failed fetches within one lock period (an outage of Redis with
    many slots), the oldest are forgotten: the memory stays bounded."""
    worker = make(600_000)
    for n in range(GIVEN_UP_KEPT + 40):
        worker._give_up(f"token-{n}")
    assert list(worker._given_up) == [f"token-{n}" for n in range(40, GIVEN_UP_KEPT + 40)]


async def test_a_fetch_given_up_on_a_lock_period_ago_is_forgotten(make: Make) -> None:
    """A lock period after a fetch was given up on, any job it took has lost its lock to the
    stalled-job check: the next failure forgets it, even while Redis never answers."""
    worker = make(1)
    worker._give_up("old")
    at = worker._given_up["old"]
    await wait_for(lambda: clock.monotonic() > at + 0.001)
    worker._give_up("new")
    assert list(worker._given_up) == ["new"]


async def test_a_completion_takes_the_next_job_in_the_same_call(
    redis_url: str, prefix: str
) -> None:
    """Jobs queued back to back: each run's end (BullMQ's moveToFinished) takes the next job,
    so every job after the first runs without the worker asking Redis for jobs on their own
    (moveToActive: once a job without the take); every job runs once, in the order queued,
    under its lock."""
    cabinets = [f"cab-{n:02d}" for n in range(12)]
    ran: list[str] = []
    holds_lock: list[bool] = []
    queue = SyncQueue("qnext", redis_url=redis_url, prefix=f"{prefix}:q")
    fetched_before: list[int] = []  # the worker's fetches so far, at each run
    fetches: list[str] = []

    async def run(job: JobHandle) -> None:
        fetched_before.append(len(fetches))
        await _record(job, ran, holds_lock)

    worker = SyncWorker("qnext", run, redis_url=redis_url, prefix=f"{prefix}:q")
    await queue.enqueue_many(cabinets)
    await worker.start()
    bullmq_worker = worker._worker
    assert bullmq_worker is not None
    fetch = bullmq_worker.moveToActive

    async def counted(token: str) -> Any:
        fetches.append(token)
        return await fetch(token)

    bullmq_worker.moveToActive = counted
    try:
        await wait_for(lambda: len(ran) == len(cabinets))
        await wait_for(lambda: bullmq_worker.drained)
    finally:
        await worker.close()
        await queue.close()
    assert ran == cabinets
    assert all(holds_lock)
    # The fetch that found the first job, and none after: each later job was taken by the end
    # of the run before it. (An idle worker asks again after each blocking wait: the count
    # after the last run grows with time, so it is not what is checked.)
    assert fetched_before == [1] * len(cabinets), fetched_before


async def _record(job: JobHandle, ran: list[str], holds_lock: list[bool]) -> None:
    ran.append(job.cabinet)
    # A write checked against the job's lock: it fails on a job taken without one.
    try:
        await job.update_data({"seen": True})
    except JobLockLostError:
        holds_lock.append(False)
    else:
        holds_lock.append(True)


async def test_a_job_taken_as_the_close_begins_is_put_back_not_run(
    redis_url: str, prefix: str
) -> None:
    """The close begins while a run ends: the end's script has already been asked to take
    the next job. That job is not run on the closing worker (its connections and lock renewal
    are being closed) but put back, due now, no attempt spent, and a new worker runs it."""
    ran: list[str] = []
    closing: list[asyncio.Future[None]] = []
    queue = SyncQueue("qclose", redis_url=redis_url, prefix=f"{prefix}:q")
    worker = SyncWorker(
        "qclose",
        lambda job: _close_after(job, worker, ran, closing),
        redis_url=redis_url,
        prefix=f"{prefix}:q",
    )
    await queue.enqueue_many(["cab-a", "cab-b"])
    await worker.start()
    try:
        await wait_for(lambda: closing)
        await closing[0]
        assert ran == ["cab-a"]
        put_back = await queue.job("cab-b")
        assert put_back is not None
        assert put_back.state in ("delayed", "waiting"), put_back
        assert put_back.attempts_made == 0
        again = SyncWorker(
            "qclose", lambda job: _record(job, ran, []), redis_url=redis_url, prefix=f"{prefix}:q"
        )
        await queue.promote_delayed()
        await again.start()
        try:
            await wait_for(lambda: len(ran) == 2)
        finally:
            await again.close()
    finally:
        await worker.close()
        await queue.close()
    assert ran == ["cab-a", "cab-b"]


async def _close_after(
    job: JobHandle, worker: SyncWorker, ran: list[str], closing: list[asyncio.Future[None]]
) -> None:
    ran.append(job.cabinet)
    # Starts on the loop's next turn: while this run's end (moveToFinished, asked to take the
    # next job, the worker not closing yet) waits on Redis.
    closing.append(asyncio.ensure_future(worker.close()))
