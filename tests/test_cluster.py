"""wbsync on a real Redis Cluster of three masters on loopback (skipped where redis-server has no
cluster support): key layout, deferral and resume, anti-overlap, penalties across processes."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator, Iterator

import pytest
from redis.asyncio.cluster import RedisCluster

from tests.test_jobs import DEFER, ONE_PER_20S, ONE_PER_HOUR, SCALE, Harness, paging_processor
from tests.waiting import wait_for
from wbsync import keys, redis_client
from wbsync.errors import ConfigError, RedisUnavailableError
from wbsync.jobs.queue import JobHandle
from wbsync.ratelimit import BucketScope, Limit, RateLimiter
from wbsync.redis_cluster import EmbeddedCluster
from wbsync.syncs import SYNCS


@pytest.fixture(scope="session")
def cluster() -> Iterator[EmbeddedCluster]:
    """One three-master cluster for the session's cluster tests."""
    try:
        with EmbeddedCluster() as started:
            yield started
    except RedisUnavailableError as exc:
        pytest.skip(f"no Redis Cluster here: {exc}")


@pytest.fixture
async def client(cluster: EmbeddedCluster) -> AsyncIterator[RedisCluster]:
    connected = redis_client.connect(cluster.url)
    assert isinstance(connected, RedisCluster)
    try:
        yield connected
    finally:
        await connected.aclose()


@pytest.fixture
async def harness(cluster: EmbeddedCluster, prefix: str) -> AsyncIterator[Harness]:
    h = Harness(cluster.url, prefix)
    try:
        yield h
    finally:
        await h.close()


def test_cluster_urls_name_their_seeds_and_bad_ones_say_what_is_wrong() -> None:
    seeds = redis_client.parse_cluster_url("redis+cluster://u:s%40cret@h1:7000,h2:7001")
    assert seeds.nodes == (("h1", 7000), ("h2", 7001))
    assert (seeds.username, seeds.password, seeds.ssl) == ("u", "s@cret", False)
    assert "cret" not in repr(seeds)
    assert redis_client.parse_cluster_url("rediss+cluster://h1:7000").ssl
    assert not redis_client.is_cluster("redis://h1:6379/0")
    with pytest.raises(ConfigError, match="'h2' is not host:port"):
        redis_client.parse_cluster_url("redis+cluster://h1:7000,h2")


def _port_of(client: RedisCluster, key: str) -> int:
    node = client.get_node_from_key(key)
    assert node is not None
    return int(node.port)


async def test_each_queue_and_bucket_in_one_slot_spread_over_the_masters(
    client: RedisCluster, prefix: str
) -> None:
    await client.initialize()
    queue_nodes = set()
    for name in SYNCS:
        tagged = f"{keys.queue_prefix(prefix)}:{keys.bullmq_queue_name(name)}"
        slots = {client.keyslot(f"{tagged}:{suffix}") for suffix in ("wait", "delayed", "7", "m")}
        assert len(slots) == 1, name  # every Lua call on the queue finds its keys in one slot
        queue_nodes.add(_port_of(client, f"{tagged}:wait"))
    assert len(queue_nodes) >= 2  # the nine queues spread; they are not all on one master
    buckets = {
        _port_of(client, keys.bucket_key(prefix, BucketScope(str(c), "finance", ONE_PER_20S)))
        for c in range(30)
    }
    assert len(buckets) == 3


async def test_deferred_job_resumes_from_its_cursor_and_is_never_doubled(
    harness: Harness, client: RedisCluster, prefix: str
) -> None:
    limiter = RateLimiter(client, prefix=prefix, time_scale=SCALE)
    seen: list[tuple[str, int, int]] = []
    queue = harness.queue("cl-defer")
    await harness.worker("cl-defer", paging_processor(limiter, 2, seen, ONE_PER_HOUR))

    first = await queue.enqueue("cab-1")
    await wait_for(lambda: harness.count("deferred") == 1)  # page 2 waits for a closed window
    again = await queue.enqueue("cab-1")  # delayed counts as live: nothing is added
    view = await queue.job("cab-1")
    assert view is not None and view.state == "delayed" and view.data["cursor"] == 1
    await client.delete(keys.bucket_key(prefix, BucketScope("cab-1", "finance", ONE_PER_HOUR)))
    await queue.promote_delayed()
    await wait_for(lambda: harness.count("completed") == 1)

    assert first.added and not again.added
    assert [cursor for _, cursor, _ in seen] == [1, 2]  # resumed from its cursor
    assert {attempts for _, _, attempts in seen} == {0}  # the deferral spent no attempt
    assert harness.count("deferred") == 1


async def test_many_cabinets_enqueue_in_one_call_and_all_complete(
    harness: Harness, client: RedisCluster, prefix: str
) -> None:
    limiter = RateLimiter(client, prefix=prefix, time_scale=SCALE)
    queue = harness.queue("cl-many")
    seen: list[tuple[str, int, int]] = []
    await harness.worker("cl-many", paging_processor(limiter, 1, seen), concurrency=4)
    cabinets = [f"c{i}" for i in range(50)]  # more than one window of parallel adds

    results = await queue.enqueue_many(cabinets + cabinets[:5])
    await wait_for(lambda: harness.count("completed") == 50)
    assert [r.added for r in results] == [True] * 50
    assert sorted(c for c, _, _ in seen) == sorted(cabinets)


async def test_a_slow_window_does_not_hold_the_slot(
    harness: Harness, client: RedisCluster, prefix: str
) -> None:
    limiter = RateLimiter(client, prefix=prefix, time_scale=SCALE)
    slow = BucketScope("slow", "finance", ONE_PER_HOUR)
    await limiter.acquire(slow)  # the slow cabinet's window stays closed until opened below
    done: list[str] = []

    async def one_page(job: JobHandle) -> None:
        limit = ONE_PER_HOUR if job.cabinet == "slow" else ONE_PER_20S
        await limiter.acquire(BucketScope(job.cabinet, "finance", limit))
        done.append(job.cabinet)

    queue = harness.queue("cl-slot")
    await harness.worker("cl-slot", DEFER.wrap(one_page), concurrency=1)
    await queue.enqueue("slow")
    await wait_for(lambda: harness.count("deferred", "slow") == 1)
    await queue.enqueue_many([f"fast-{i}" for i in range(5)])
    await wait_for(lambda: harness.count("completed") == 5)  # the one slot ran them all
    assert "slow" not in done
    await client.delete(keys.bucket_key(prefix, slow))  # open the window (a missing bucket is full)
    await queue.promote_delayed()
    await wait_for(lambda: harness.count("completed", "slow") == 1)


PENALIZE = """
import asyncio, sys
from wbsync import redis_client
from wbsync.ratelimit import BucketScope, Limit, RateLimiter
async def main():
    redis = redis_client.connect(sys.argv[1])
    limiter = RateLimiter(redis, prefix=sys.argv[2])
    await limiter.penalize(BucketScope("seller-x", "g", Limit(1, 10, 10)), 2000)
    await redis.aclose()
asyncio.run(main())
"""


async def test_a_penalty_from_another_process_holds_every_process(
    cluster: EmbeddedCluster, client: RedisCluster, prefix: str
) -> None:
    limiter = RateLimiter(client, prefix=prefix)
    bucket = BucketScope("seller-x", "g", Limit(period_s=1, limit=10, burst=10))
    assert (await limiter.try_acquire(bucket)).acquired
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", PENALIZE, cluster.url, prefix)
    assert await proc.wait() == 0
    refused = await limiter.try_acquire(bucket)
    elapsed_ms = (time.monotonic() - started) * 1000
    assert not refused.acquired
    assert 2000 - elapsed_ms <= refused.wait_ms <= 2000
