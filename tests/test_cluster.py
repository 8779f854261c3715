"""wbsync on a real Redis Cluster of three masters on loopback (skipped where redis-server has no
cluster support): key layout, deferral and resume, anti-overlap, penalties across processes, the
fan-out and the syncs against the emulator, the status page, a master restarted mid-run, and the
errors redis-py's cluster client raises while it reconnects."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Iterator
from typing import Any, TypeVar

import httpx
import pytest
from pydantic import SecretStr
from redis.asyncio.cluster import RedisCluster

from tests.support.databases import DatabaseFactory
from tests.support.jobs import DEFER, ONE_PER_20S, ONE_PER_HOUR, SCALE, Harness, paging_processor
from tests.support.waiting import wait_for
from wbsync.api import create_app
from wbsync.composition.service import active_cabinet_ids
from wbsync.composition.workers import build_workers
from wbsync.config import Settings
from wbsync.demo.expected import expected_datasets
from wbsync.emulator import Emulator, EmulatorConfig, SellerSizes, running_emulator
from wbsync.errors import ConfigError, RedisUnavailableError
from wbsync.jobs.failures import FailurePolicy
from wbsync.jobs.fanout import FanOut
from wbsync.jobs.handle import JobHandle
from wbsync.jobs.job_data import JobDataWriter, StreamEntry
from wbsync.jobs.leader import FanOutLeases
from wbsync.jobs.model import Outcome
from wbsync.jobs.queue import SyncQueue
from wbsync.jobs.worker import SyncWorker
from wbsync.ratelimit import BucketScope, Limit, LimiterOptions, RateLimiter
from wbsync.redis import keys, redis_bounds, redis_client
from wbsync.redis.redis_cluster import EmbeddedCluster
from wbsync.redis.throughput import Throughput
from wbsync.shared.runtime import Runtime
from wbsync.store import Cabinet
from wbsync.store.datasets import DATASETS
from wbsync.syncs import SYNCS, SyncOptions
from wbsync.syncs.finance import FINANCE_DETAILED_REPORT
from wbsync.system import clock


@pytest.fixture(scope="session")
def cluster() -> Iterator[EmbeddedCluster]:
    """One three-master cluster for the session's cluster tests."""
    try:
        with EmbeddedCluster() as started:
            yield started
    except RedisUnavailableError as exc:
        pytest.skip(f"no Redis Cluster here: {exc}")


@pytest.fixture
def replicated() -> Iterator[EmbeddedCluster]:
    """A three-master cluster with a replica per master, of one test's own (it fails one over)."""
    try:
        with EmbeddedCluster(replicas=1) as started:
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
    # The change stream is in a slot of its own: a cursor save refuses to carry its entry.
    job_key = f"{keys.queue_prefix(prefix)}:{keys.bullmq_queue_name(FINANCE)}:7"
    writer = JobDataWriter(client, lambda _jid: job_key)
    entry = StreamEntry(keys.change_stream_key(prefix), {"rows": 1}, 10)
    with pytest.raises(ValueError, match="slot"):
        await writer.save("7", "token", {"cabinet": "7"}, entry=entry)


async def test_penalties_are_recorded_listed_and_lifted_on_the_cluster(
    client: RedisCluster, prefix: str
) -> None:
    """A seller's method bucket and global bucket in one pass (one slot), the penalty record
    written with the penalty, listed from the index (another slot) and lifted."""
    limiter = RateLimiter(client, LimiterOptions(prefix=prefix, time_scale=SCALE))
    sellers = [f"pen-{i}" for i in range(6)]  # several slots, on several masters
    for seller in sellers:
        await limiter.penalize(limiter.seller_scope(seller), 30_000, words="global limiter")
        bucket = BucketScope(seller, "finance", ONE_PER_20S)
        refused = await limiter.try_acquire_all(limiter.spends(bucket))
        assert not refused.acquired and refused.blocking == 1
    listed = await limiter.penalties()
    assert sorted(p.seller for p in listed) == sellers
    assert {p.words for p in listed} == {"global limiter"}
    lifted = await limiter.lift(sellers[0], limiter.seller_scope(sellers[0]).group)
    assert lifted is not None and lifted.seller == sellers[0]
    assert (
        await limiter.try_acquire_all(limiter.spends(BucketScope(sellers[0], "f", ONE_PER_20S)))
    ).acquired
    assert len(await limiter.penalties()) == len(sellers) - 1


async def test_fan_out_leases_of_every_queue_in_one_call_on_the_cluster(
    client: RedisCluster, prefix: str
) -> None:
    names = list(SYNCS)
    first = FanOutLeases(client, prefix=prefix, lease_ms=60_000, owner="first")
    second = FanOutLeases(client, prefix=prefix, lease_ms=60_000, owner="second")
    assert (await first.hold(names)).queues == tuple(names)  # nine keys, one slot, one call
    assert (await second.hold(names)).queues == ()
    await first.set_through_ms({names[0]: 123})
    assert (await second.through_ms(names[:1])) == {names[0]: 123}
    await first.release(names)
    assert (await second.hold(names)).queues == tuple(names)


async def test_deferred_job_resumes_from_its_cursor_and_is_never_doubled(
    harness: Harness, client: RedisCluster, prefix: str
) -> None:
    limiter = RateLimiter(client, LimiterOptions(prefix=prefix, time_scale=SCALE))
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
    limiter = RateLimiter(client, LimiterOptions(prefix=prefix, time_scale=SCALE))
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
    limiter = RateLimiter(client, LimiterOptions(prefix=prefix, time_scale=SCALE))
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


T = TypeVar("T")


async def _dropped_under(client: RedisCluster, key: str, call: Awaitable[T]) -> tuple[T, int]:
    """Await ``call`` with the connections to ``key``'s node dropped just as its command is
    being sent, as redis-py drops a connection itself when a command on it fails (a node
    failing over); the call's result, and how many of the node's connections were opened anew.

    A command takes a connection from the node's pool and, in the same turn of the event loop,
    starts its write (under a timeout, as a task of its own) and yields: the loop is turned until
    a connection is taken, which puts the command exactly there. redis-py has no public way to
    see this, hence its pool's private fields. redis-py (8.2 and later) finds the connection
    closed before its write and the cluster client sends the command again; before 8.2 the write
    met a connection with no writer (``AttributeError``, which wbsync took for a Redis failure).
    """
    node = client.get_node_from_key(key)
    assert node is not None
    task = asyncio.ensure_future(call)
    for _ in range(100):
        await asyncio.sleep(0)
        if len(node._free) < len(node._connections):
            break
    else:
        raise AssertionError("the command never took a connection")
    dropped = {id(c): c._writer for c in node._connections}
    for connection in node._connections:
        await connection.disconnect(nowait=True)
    result = await task
    fresh = sum(1 for c in node._connections if c._writer not in (None, dropped.get(id(c))))
    return result, fresh


async def test_a_command_on_a_connection_dropped_under_it_is_sent_again_on_a_fresh_one(
    cluster: EmbeddedCluster, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    client = redis_bounds.connect(cluster.url)
    assert isinstance(client, RedisCluster)
    try:
        scope = BucketScope("cab-drop", "finance", ONE_PER_20S)
        bucket = keys.bucket_key(prefix, scope)
        await client.set(bucket, "x")  # a connection to the bucket's node is open
        value, fresh = await _dropped_under(client, bucket, client.get(bucket))
        assert (value, fresh) == ("x", 1)
        await client.delete(bucket)

        limiter = RateLimiter(client, LimiterOptions(prefix=prefix))
        await limiter.peek(scope)
        taken, fresh = await _dropped_under(client, bucket, limiter.try_acquire(scope))
        assert taken.acquired and fresh == 1
        assert not (await limiter.try_acquire(scope)).acquired  # the bucket took it once

        throughput = Throughput(client, prefix=prefix)
        await throughput.record("q-drop", pages=1)
        minute = keys.throughput_key(prefix, "q-drop", int(clock.now_ms() // 60_000))
        caplog.set_level(logging.WARNING, logger="wbsync.redis.throughput")
        _, fresh = await _dropped_under(client, minute, throughput.record("q-drop", pages=1))
        assert fresh == 1
        assert not [r for r in caplog.records if r.name == "wbsync.redis.throughput"]
    finally:
        await client.aclose()


async def test_a_job_that_meets_a_dropped_connection_completes_in_its_first_run(
    cluster: EmbeddedCluster, prefix: str
) -> None:
    client = redis_bounds.connect(cluster.url)
    assert isinstance(client, RedisCluster)
    limiter = RateLimiter(client, LimiterOptions(prefix=prefix, time_scale=SCALE))
    scope = BucketScope("cab-once", "finance", ONE_PER_20S)
    runs: list[int] = []

    async def process(job: JobHandle) -> None:
        runs.append(job.attempts_made)
        await limiter.peek(scope)  # the bucket's node has a connection
        await _dropped_under(client, keys.bucket_key(prefix, scope), limiter.acquire(scope))

    policy = FailurePolicy(budget=3, retry_ms=10, retry_max_ms=100)
    outcomes: list[str] = []
    queue = SyncQueue("cl-drop", redis_url=cluster.url, prefix=f"{prefix}:q", attempts=1)
    worker = SyncWorker(
        "cl-drop",
        policy.wrap(process),
        redis_url=cluster.url,
        prefix=f"{prefix}:q",
        on_outcome=lambda o: outcomes.append(o.outcome),
    )
    await worker.start()
    try:
        await queue.enqueue("cab-once")
        await wait_for(lambda: "completed" in outcomes or "failed" in outcomes)
        assert outcomes == ["completed"]  # no attempt spent, no deferral
        assert runs == [0]
    finally:
        await worker.close()
        await queue.close()
        await client.aclose()


PENALIZE = """
import asyncio, sys
from wbsync.redis import redis_client
from wbsync.ratelimit import BucketScope, Limit, LimiterOptions, RateLimiter
async def main():
    redis = redis_client.connect(sys.argv[1])
    limiter = RateLimiter(redis, LimiterOptions(prefix=sys.argv[2]))
    await limiter.penalize(BucketScope("seller-x", "g", Limit(1, 10, 10)), 2000)
    await redis.aclose()
asyncio.run(main())
"""


async def test_a_penalty_from_another_process_holds_every_process(
    cluster: EmbeddedCluster, client: RedisCluster, prefix: str
) -> None:
    limiter = RateLimiter(client, LimiterOptions(prefix=prefix))
    bucket = BucketScope("seller-x", "g", Limit(period_s=1, limit=10, burst=10))
    assert (await limiter.try_acquire(bucket)).acquired
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", PENALIZE, cluster.url, prefix)
    assert await asyncio.wait_for(proc.wait(), 60) == 0
    refused = await limiter.try_acquire(bucket)
    elapsed_ms = (time.monotonic() - started) * 1000
    assert not refused.acquired
    assert 2000 - elapsed_ms <= refused.wait_ms <= 2000


# The whole flow on the cluster: fan-out, syncs against the emulator, the status page, a restart.

FLOW_SCALE = 0.005  # WB's minute is 300 ms
SECRET = "cluster-test-secret"
API_KEY = "cluster-test-api-key-0123456789abcdef"
SELLERS = [f"0000000{i}-0000-4000-8000-0000000000c0" for i in range(1, 4)]
FINANCE = "rnp-finance-sync"
CATALOG = "catalog-sync"


@pytest.fixture
async def emulator() -> AsyncIterator[Emulator]:
    config = EmulatorConfig(
        serve_disabled_in_docs=True,  # the booking monitor polls acceptance coefficients
        time_scale=FLOW_SCALE,
        grace_ms=100,  # a loaded machine delays a request after its token was taken
        anchor_date=clock.wb_today(),
        sizes=SellerSizes(report_rows=24, products=12),
        page_size={"finance.detailed_report": 6},
    )
    async with running_emulator(config) as emu:
        yield emu


async def _start_runtime(
    url: str, prefix: str, database_factory: DatabaseFactory, emulator: Emulator, **extra: Any
) -> Runtime:
    settings = Settings(
        redis_url=url,
        redis_prefix=prefix,
        database_url=await database_factory.new_migrated_url("sqlite"),
        secret_key=SecretStr(SECRET),
        api_keys=[SecretStr(API_KEY)],
        wb_base_url=emulator.base_url,
        time_scale=FLOW_SCALE,
        **extra,
    )
    return await Runtime(settings, redis_url=url).start()


@pytest.fixture
async def runtime(
    cluster: EmbeddedCluster, prefix: str, database_factory: DatabaseFactory, emulator: Emulator
) -> AsyncIterator[Runtime]:
    started = await _start_runtime(cluster.url, prefix, database_factory, emulator)
    try:
        yield started
    finally:
        await started.aclose()


async def _run_workers(runtime: Runtime, names: list[str], outcomes: list[Outcome]) -> list[Any]:
    workers = build_workers(runtime, names, on_outcome=outcomes.append)
    for worker in workers:
        await worker.start()
    return workers


async def _finance_exact(runtime: Runtime, emulator: Emulator, cabinets: list[Cabinet]) -> bool:
    spec = DATASETS["finance_report"]
    for cabinet in cabinets:
        rows = expected_datasets(
            emulator, cabinet.seller_id, today=clock.wb_today(), options=SyncOptions()
        )
        want = {spec.row_key(r) for r in rows["finance_report"]}
        got = {spec.row_key(r) for r in await runtime.store.fetch("finance_report", cabinet.id)}
        if got != want:
            return False
    return True


async def test_fan_out_syncs_and_the_status_page_on_the_cluster(
    runtime: Runtime, emulator: Emulator
) -> None:
    cabinets = [
        await runtime.store.cabinets.add(f"cl-{i}", emulator.token(s), s)
        for i, s in enumerate(SELLERS[:2])
    ]
    held = cabinets[0]
    window = runtime.client(held).scope(FINANCE_DETAILED_REPORT)
    # Its finance window stays closed as long as anything may close it (18 s at this scale).
    await runtime.limiter.penalize(window, runtime.limiter.max_wait_ms)
    outcomes: list[Outcome] = []
    workers = await _run_workers(runtime, [FINANCE, CATALOG], outcomes)
    try:
        fanout = FanOut(
            {n: runtime.queue(n) for n in (FINANCE, CATALOG)},
            lambda: active_cabinet_ids(runtime),
            {FINANCE: 3600.0, CATALOG: 3600.0},
        )
        reports = await fanout.run_once()
        assert {n: r.added for n, r in reports.items()} == {FINANCE: 2, CATALOG: 2}
        finance = runtime.queue(FINANCE)
        await wait_for(lambda: _state(finance, str(held.id), "delayed"))
        await wait_for(lambda: sum(o.outcome == "completed" for o in outcomes) == 3)

        transport = httpx.ASGITransport(app=create_app(runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://wbsync.test") as api:
            status = (await api.get("/api/v1/status", headers=_AUTH)).json()
            page = await api.get("/", headers=_AUTH)
        [entry] = [c for c in status["cabinets"] if c["cabinet"]["id"] == held.id]
        assert [j["state"] for j in entry["jobs"] if j["queue"] == FINANCE] == ["delayed"]
        assert page.status_code == 200 and "delayed" in page.text

        await runtime.redis.delete(keys.bucket_key(runtime.settings.redis_prefix, window))
        await finance.promote_delayed()  # the window opens: the held job resumes and finishes
        await wait_for(lambda: _finance_exact(runtime, emulator, cabinets))
        await wait_for(lambda: sum(o.outcome == "completed" for o in outcomes) == 4)
        # Each stored page was counted by its cursor save's script, in the queue's slot.
        history = await runtime.throughput.history([FINANCE])
        assert sum(history.queues[FINANCE]["pages"][-2:]) >= len(cabinets)
        # The pages' events went on their own: the stream is in another slot.
        assert await runtime.redis.xlen(runtime.change_stream.key) >= len(cabinets)
    finally:
        for worker in workers:
            await worker.close()
    assert not [o for o in outcomes if o.outcome == "failed"]


async def test_a_master_restarted_mid_run_loses_nothing(
    cluster: EmbeddedCluster, client: RedisCluster, runtime: Runtime, emulator: Emulator
) -> None:
    cabinets = [
        await runtime.store.cabinets.add(f"rs-{i}", emulator.token(s), s)
        for i, s in enumerate(SELLERS)
    ]
    outcomes: list[Outcome] = []
    workers = await _run_workers(runtime, [FINANCE], outcomes)
    queue_key = f"{runtime.queue_prefix}:{keys.bullmq_queue_name(FINANCE)}:wait"
    await client.initialize()
    master = cluster.ports.index(_port_of(client, queue_key))  # the finance queue's master
    try:
        await runtime.queue(FINANCE).enqueue_many([str(c.id) for c in cabinets])
        await wait_for(lambda: _stored(runtime, cabinets, at_least=6))  # mid-run
        await asyncio.to_thread(cluster.restart, master)
        await wait_for(lambda: _finance_exact(runtime, emulator, cabinets), timeout_s=60)
        await wait_for(lambda: sum(o.outcome == "completed" for o in outcomes) == 3)
    finally:
        for worker in workers:
            await worker.close()
    # Every job finished and none failed: whatever the cluster client raised while the master
    # was away (an AttributeError from a connection it reconnects, too) was a Redis failure.
    assert (await runtime.queue(FINANCE).counts())["failed"] == 0


async def test_a_failover_mid_run_spends_no_attempt_and_orphans_no_job(
    replicated: EmbeddedCluster,
    prefix: str,
    database_factory: DatabaseFactory,
    emulator: Emulator,
) -> None:
    """``CLUSTER FAILOVER`` of the finance queue's master while its syncs run and other
    commands are in flight, with one attempt per job: every job completes, none fails, no job
    is left active, the rows are exact."""
    runtime = await _start_runtime(
        replicated.url, prefix, database_factory, emulator, job_attempts=1
    )
    cabinets = [
        await runtime.store.cabinets.add(f"fo-{i}", emulator.token(s), s)
        for i, s in enumerate(SELLERS)
    ]
    outcomes: list[Outcome] = []
    workers = await _run_workers(runtime, [FINANCE], outcomes)
    client = redis_client.connect(replicated.url)
    assert isinstance(client, RedisCluster)
    try:
        queue_key = f"{runtime.queue_prefix}:{keys.bullmq_queue_name(FINANCE)}:wait"
        await client.initialize()
        master = replicated.ports.index(_port_of(client, queue_key))
        await runtime.queue(FINANCE).enqueue_many([str(c.id) for c in cabinets])
        await wait_for(lambda: _stored(runtime, cabinets, at_least=6))  # mid-run
        # Commands in flight on the runtime's client (the one the jobs' limiter uses) while the
        # master hands over, as many processes' are in production.
        stop = asyncio.Event()
        load = [asyncio.ensure_future(_keep_busy(runtime, cabinets, stop)) for _ in range(20)]
        await asyncio.to_thread(replicated.failover, master)
        stop.set()
        await asyncio.gather(*load)
        await wait_for(lambda: _finance_exact(runtime, emulator, cabinets), timeout_s=60)
        await wait_for(lambda: sum(o.outcome == "completed" for o in outcomes) == 3)
        assert not [o for o in outcomes if o.outcome == "failed"]
        counts = await runtime.queue(FINANCE).counts()
        assert counts["failed"] == counts["active"] == 0
    finally:
        for worker in workers:
            await worker.close()
        await client.aclose()
        await runtime.aclose()


async def _keep_busy(runtime: Runtime, cabinets: list[Cabinet], stop: asyncio.Event) -> None:
    """Read the cabinets' finance buckets until ``stop``; a failing read is the fail-over's."""
    scopes = [runtime.client(c).scope(FINANCE_DETAILED_REPORT) for c in cabinets]
    while not stop.is_set():
        with contextlib.suppress(RedisUnavailableError):
            await runtime.limiter.peek_many(scopes)


_AUTH = {"Authorization": f"Bearer {API_KEY}"}


async def _state(queue: SyncQueue, cabinet: str, state: str) -> bool:
    job = await queue.job(cabinet)
    return job is not None and job.state == state


async def _stored(runtime: Runtime, cabinets: list[Cabinet], *, at_least: int) -> bool:
    counts = [await runtime.store.count("finance_report", c.id) for c in cabinets]
    return sum(counts) >= at_least
