"""Poison job data: data that cannot be read, written into Redis as a foreign producer or a hand
edit leaves it, fails its job at once with the reason, never loops, and never holds up the
queue's other jobs, in a run or in the put-back at a stop."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from tests.support.waiting import wait_for
from wbsync.jobs.handle import JobHandle
from wbsync.jobs.model import job_id
from wbsync.jobs.queue import SyncQueue
from wbsync.jobs.worker import SyncWorker
from wbsync.redis import keys

QUEUE = "qpoison"
POISON = "{not json"
# Short, so that a job left active without a run would be found stalled (and looped) at once.
LOCK_MS = 300
# For jobs run or fetched around a stop: a lock that outlives a loaded machine's stalls of the
# event loop (at 300 ms the worker's own stalled-job check took the running job back before
# the stop could put it back: "lock lost", the job waiting instead of delayed).
RUN_LOCK_MS = 30_000


def _job_key(prefix: str, cabinet: str) -> str:
    """The job hash's key, as BullMQ builds it (the key a foreign producer writes)."""
    return f"{keys.queue_prefix(prefix)}:{keys.bullmq_queue_name(QUEUE)}:{job_id(QUEUE, cabinet)}"


@pytest.fixture
async def queue(redis_url: str, prefix: str) -> AsyncIterator[SyncQueue]:
    q = SyncQueue(QUEUE, redis_url=redis_url, prefix=keys.queue_prefix(prefix))
    try:
        yield q
    finally:
        await q.close()


async def _poison(redis: Redis, prefix: str, cabinet: str) -> None:
    """Overwrite the stored job's data with text that is not JSON (HSET, as a producer would)."""
    key = _job_key(prefix, cabinet)
    assert await redis.hexists(key, "data")  # the job is there: this is its real key
    await redis.hset(key, "data", POISON)


def _worker(
    redis_url: str, prefix: str, ran: list[str], *, gate: asyncio.Event, lock_ms: int = LOCK_MS
) -> SyncWorker:
    async def process(job: JobHandle) -> None:
        ran.append(job.cabinet)
        await gate.wait()

    return SyncWorker(
        QUEUE,
        process,
        redis_url=redis_url,
        prefix=keys.queue_prefix(prefix),
        lock_duration_ms=lock_ms,
    )


async def test_data_that_is_not_json_fails_its_job_once_and_the_others_run(
    redis: Redis, redis_url: str, prefix: str, queue: SyncQueue
) -> None:
    await queue.enqueue_many(["a", "poisoned", "b"])
    await _poison(redis, prefix, "poisoned")
    ran: list[str] = []
    open_gate = asyncio.Event()
    open_gate.set()
    worker = _worker(redis_url, prefix, ran, gate=open_gate)
    await worker.start()
    try:
        await wait_for(lambda: _in(redis, prefix, "poisoned", "failed"), timeout_s=10)
        await wait_for(lambda: sorted(ran) == ["a", "b"])
    finally:
        await worker.close()
    view = await queue.job("poisoned")
    assert view is not None and view.state == "failed"
    assert view.failed_reason is not None
    assert view.failed_reason.startswith("job data is not JSON: ")
    assert repr(POISON) in view.failed_reason
    key = _job_key(prefix, "poisoned")
    # Failed at its first fetch: never stalled, never run, its data left for the operator.
    assert await redis.hget(key, "stc") in (None, "0")
    assert await redis.hget(key, "data") == POISON
    assert "poisoned" not in ran
    # The cabinet is not blocked: its next job replaces the failed one and runs.
    result = await queue.enqueue("poisoned")
    assert result.added


async def test_the_put_back_at_a_stop_moves_every_unrun_job_past_a_poisoned_one(
    redis: Redis, redis_url: str, prefix: str, queue: SyncQueue
) -> None:
    ran: list[str] = []
    gate = asyncio.Event()  # never opened: the running job is cut short at the stop
    worker = _worker(redis_url, prefix, ran, gate=gate, lock_ms=RUN_LOCK_MS)
    await worker.start()
    await queue.enqueue("running")
    await wait_for(lambda: ran == ["running"])
    await queue.enqueue_many(["fetched", "poisoned"])
    await _poison(redis, prefix, "poisoned")
    # Two fetches that raced the stop, made as BullMQ's loop makes them: both jobs are now
    # active under this worker's lock and will never run here.
    bullmq_worker = worker._worker
    assert bullmq_worker is not None
    for n in (1, 2):
        with contextlib.suppress(ValueError):  # a worker that could not parse what it fetched
            await bullmq_worker.moveToActive(f"{bullmq_worker.id}:raced-{n}")
    assert await _in(redis, prefix, "fetched", "active")
    assert await _in(redis, prefix, "poisoned", "active")
    await worker.close(grace_s=0.1)
    for cabinet in ("running", "fetched", "poisoned"):
        assert await _in(redis, prefix, cabinet, "delayed"), cabinet
        assert not await _in(redis, prefix, cabinet, "active"), cabinet
        assert await redis.hget(_job_key(prefix, cabinet), "atm") in (None, "0"), cabinet
    # The next worker fails the poisoned job at once and runs the other two.
    ran.clear()
    gate.set()
    successor = _worker(redis_url, prefix, ran, gate=gate, lock_ms=RUN_LOCK_MS)
    await successor.start()
    try:
        await queue.promote_delayed()
        await wait_for(lambda: _in(redis, prefix, "poisoned", "failed"), timeout_s=10)
        await wait_for(lambda: sorted(ran) == ["fetched", "running"])
    finally:
        await successor.close()


async def _in(redis: Redis, prefix: str, cabinet: str, structure: str) -> bool:
    """Whether the cabinet's job id is in one of BullMQ's state structures, read raw (a view of
    the job would have to read its data)."""
    key = f"{keys.queue_prefix(prefix)}:{keys.bullmq_queue_name(QUEUE)}:{structure}"
    jid = job_id(QUEUE, cabinet)
    if structure in ("failed", "delayed"):
        return await redis.zscore(key, jid) is not None
    return jid in await redis.lrange(key, 0, -1)


async def test_options_that_are_not_json_fail_their_job_once_and_the_others_run(
    redis: Redis, redis_url: str, prefix: str, queue: SyncQueue
) -> None:
    """A job hash whose ``opts`` (BullMQ's job options: attempts, backoff, removal) is not a JSON
    object fails at its first fetch with the reason, instead of raising out of every fetch."""
    await queue.enqueue_many(["a", "bad-opts", "listed-opts", "b"])
    await redis.hset(_job_key(prefix, "bad-opts"), "opts", POISON)
    await redis.hset(_job_key(prefix, "listed-opts"), "opts", "[1, 2]")
    ran: list[str] = []
    open_gate = asyncio.Event()
    open_gate.set()
    worker = _worker(redis_url, prefix, ran, gate=open_gate)
    await worker.start()
    try:
        await wait_for(lambda: _in(redis, prefix, "bad-opts", "failed"), timeout_s=10)
        await wait_for(lambda: _in(redis, prefix, "listed-opts", "failed"), timeout_s=10)
        await wait_for(lambda: sorted(ran) == ["a", "b"])
    finally:
        await worker.close()
    for cabinet, stored in (("bad-opts", POISON), ("listed-opts", "[1, 2]")):
        view = await queue.job(cabinet)
        assert view is not None and view.state == "failed"
        assert view.failed_reason is not None
        assert view.failed_reason.startswith("job options are not a JSON object: "), cabinet
        key = _job_key(prefix, cabinet)
        assert await redis.hget(key, "stc") in (None, "0")  # never stalled, never looped
        assert await redis.hget(key, "opts") == stored  # left for the operator
    assert "bad-opts" not in ran and "listed-opts" not in ran
    assert (await queue.enqueue("bad-opts")).added  # the cabinet is not blocked
