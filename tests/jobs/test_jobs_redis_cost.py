"""What a page and an idle worker cost in Redis: the cursor save carries the page's throughput
count (one call, lock-checked, one slot), counts set their expiry once, and an idle worker asks
for jobs once per blocking wait, not once per slot; an enqueue of live jobs reads their
states once."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio import Redis

from tests.support.waiting import wait_for
from wbsync.errors import JobLockLostError
from wbsync.jobs.handle import JobHandle
from wbsync.jobs.job_data import JobDataWriter, StreamEntry
from wbsync.jobs.lag import LagHistory
from wbsync.jobs.queue import ENQUEUE_BATCH, SyncQueue
from wbsync.jobs.worker import SyncWorker
from wbsync.redis import keys
from wbsync.redis.redis_server import EmbeddedRedis
from wbsync.redis.throughput import KEEP_S, Count, Throughput


async def test_a_cursor_save_counts_its_page_and_a_lost_lock_writes_neither(
    redis_url: str, prefix: str, redis: Redis
) -> None:
    queue = SyncQueue("cost", redis_url=redis_url, prefix=f"{prefix}:q")
    throughput = Throughput(redis, prefix=prefix)
    seen: dict[str, Any] = {}

    async def process(job: JobHandle) -> None:
        count = throughput.count_page("cost")
        seen["key"] = count.key
        await job.save_cursor({"page": 1}, count=count)
        seen["after_save"] = await redis.hget(count.key, "pages")
        seen["ttl"] = await redis.ttl(count.key)
        try:  # a count in another queue's slot could not run on a cluster: refused, not sent
            await job.save_cursor({"page": 2}, count=throughput.count_page("other"))
        except ValueError as exc:
            seen["other_slot"] = exc
        lock = f"{prefix}:q:{keys.bullmq_queue_name('cost')}:{job.id}:lock"
        await redis.set(lock, "the-new-owner")  # taken over, as after a stall
        try:
            await job.save_cursor({"page": 3}, count=count)
        except JobLockLostError as exc:
            seen["lost"] = exc
        await redis.delete(lock)

    worker = SyncWorker("cost", process, redis_url=redis_url, prefix=f"{prefix}:q")
    await worker.start()
    try:
        await queue.enqueue("c1")
        await wait_for(lambda: "lost" in seen)
        job = await queue.job("c1")
        assert job is not None and job.data["cursor"] == {"page": 1}
    finally:
        await worker.close()
        await queue.close()
    assert seen["after_save"] in ("1", b"1")
    assert 0 < seen["ttl"] <= KEEP_S
    assert "slot" in str(seen["other_slot"])
    assert await redis.hget(seen["key"], "pages") in ("1", b"1")  # the lost save counted nothing


async def test_a_count_sets_the_expiry_at_its_first_write_of_the_minute_only(
    redis: Redis, prefix: str
) -> None:
    throughput = Throughput(redis, prefix=prefix)
    key = throughput.count_page("expiry").key
    await throughput.record("expiry", pages=1)
    assert 0 < await redis.ttl(key) <= KEEP_S
    await redis.persist(key)  # shows whether a later count writes the expiry again
    await throughput.record("expiry", pages=2)
    assert await redis.ttl(key) == -1  # one HINCRBY, no EXPIRE
    assert await redis.hget(key, "pages") in ("3", b"3")
    await throughput.record("expiry", upstream_429=1)  # a field's first count sets it again
    assert 0 < await redis.ttl(key) <= KEEP_S


def test_a_count_is_a_value() -> None:
    count = Count("k", "pages", 1)
    assert count.keep_s == KEEP_S
    with pytest.raises(AttributeError):
        count.amount = 2  # type: ignore[misc]


async def test_an_idle_worker_asks_for_jobs_once_per_wait_not_once_per_slot() -> None:
    """Five slots, no jobs: after the start (each slot may ask once), one ``moveToActive`` per
    blocking wait. The port used to start every free slot's fetch at once, so each wait cost
    one ``moveToActive`` per slot."""
    slots, waits = 5, 4
    with EmbeddedRedis() as server:
        stats = Redis.from_url(server.url)

        async def calls() -> dict[str, int]:
            info = await stats.info("commandstats")
            return {
                name: int(info.get(f"cmdstat_{name}", {}).get("calls", 0))
                for name in ("bzpopmin", "evalsha")
            }

        async def nothing(job: JobHandle) -> None:
            raise AssertionError("no job was added")

        worker = SyncWorker(
            "idle", nothing, redis_url=server.url, prefix="cost:q", concurrency=slots
        )
        await worker.start()
        try:
            await wait_for(lambda: _at_least(calls, "bzpopmin", waits), timeout_s=60.0)
            seen = await calls()
        finally:
            await worker.close()
            await stats.aclose()
    # Every wait that ended (all but the one under way) was followed by one fetch.
    assert seen["evalsha"] <= slots + seen["bzpopmin"]


async def _at_least(calls: Any, name: str, n: int) -> bool:
    return bool((await calls())[name] >= n)


async def test_an_enqueue_of_live_jobs_reads_their_states_once_not_once_each() -> None:
    """Enqueueing again cabinets whose jobs are all live (more than a batch of them): one read
    of the queue's states for the call, no state lookup per cabinet; nothing added."""
    cabinets = [f"live-{i}" for i in range(ENQUEUE_BATCH + 10)]
    with EmbeddedRedis() as server:
        stats = Redis.from_url(server.url)
        queue = SyncQueue("qlive", redis_url=server.url, prefix="cost:q")

        async def scripts() -> int:
            info = await stats.info("commandstats")
            return sum(
                int(info.get(f"cmdstat_{n}", {}).get("calls", 0)) for n in ("eval", "evalsha")
            )

        try:
            await queue.enqueue_many(cabinets)
            before = await scripts()
            again = await queue.enqueue_many(cabinets)
            ran = await scripts() - before
        finally:
            await queue.close()
            await stats.aclose()
    assert not any(r.added for r in again) and {r.state for r in again} == {"waiting"}
    assert ran == 1  # the states' read; before, one BullMQ getState per cabinet


async def test_a_cursor_save_carries_the_page_event_and_run_lag_and_a_lost_lock_only_the_event(
    redis_url: str, prefix: str, redis: Redis
) -> None:
    """One script call stores the cursor, the change-stream entry of the page and (the first
    save of a run only) the start lag. A save refused for a lost lock writes neither data nor
    lag, but its event: the page's rows are committed whoever owns the job now."""
    queue = SyncQueue("cost", redis_url=redis_url, prefix=f"{prefix}:q")
    lags = LagHistory(redis, prefix=prefix)
    stream_key, count_key = keys.change_stream_key(prefix), keys.change_count_key(prefix)
    seen: dict[str, Any] = {}

    def entry(seq: int) -> StreamEntry:
        fields: dict[str, str | int] = {
            "dataset": "orders",
            "cabinet": 7,
            "rows": 1,
            "last_seq": seq,
        }
        return StreamEntry(stream_key, fields, 100, counter=(count_key, "stream_seq"))

    async def process(job: JobHandle) -> None:
        job.note_lag(lags.sample("cost", 1500))
        await job.save_cursor({"page": 1}, entry=entry(1))
        seen["unsent"] = job.unsent_lag()
        await job.save_cursor({"page": 2}, entry=entry(2))
        job.note_lag(lags.sample("cost", 2500))  # noted, then the lock is lost
        lock = f"{prefix}:q:{keys.bullmq_queue_name('cost')}:{job.id}:lock"
        await redis.set(lock, "the-new-owner")
        try:
            await job.save_cursor({"page": 3}, entry=entry(3))
        except JobLockLostError as exc:
            seen["lost"] = exc
        seen["unsent_after_loss"] = job.unsent_lag()
        await redis.delete(lock)

    worker = SyncWorker("cost", process, redis_url=redis_url, prefix=f"{prefix}:q")
    await worker.start()
    try:
        await queue.enqueue("c1")
        await wait_for(lambda: "lost" in seen)
        job = await queue.job("c1")
        assert job is not None and job.data["cursor"] == {"page": 2}
    finally:
        await worker.close()
        await queue.close()
    entries: Any = await redis.xrange(stream_key)
    assert [fields["last_seq"] for _id, fields in entries] == ["1", "2", "3"]
    assert [fields["stream_seq"] for _id, fields in entries] == ["1", "2", "3"]  # numbered
    lag_entries: Any = await redis.lrange(keys.lag_key(prefix, "cost"), 0, -1)
    assert [e.partition(":")[2] for e in lag_entries] == ["1500"]  # once, with the first save
    assert 0 < await redis.ttl(keys.lag_key(prefix, "cost"))
    assert seen["unsent"] is None and seen["unsent_after_loss"] is None
    with pytest.raises(ValueError, match="slot"):  # a lag of another queue: refused, not sent
        await JobDataWriter(redis, lambda jid: f"{prefix}:q:{{cost}}:{jid}").save(
            "x", "token", {}, lag=lags.sample("other", 1)
        )
