"""Many processes: one fan-out leader per queue (leases in Redis, takeover when a leader dies),
the shared fan-out schedule, and per-queue concurrency."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr, ValidationError
from redis.asyncio import Redis

from tests.support.databases import DatabaseFactory
from tests.support.waiting import wait_for
from wbsync.composition.startup import check, not_loaded_here
from wbsync.composition.workers import queue_option
from wbsync.config import Settings
from wbsync.demo.expected import expected_datasets
from wbsync.emulator import Emulator, EmulatorConfig, SellerSizes, running_emulator
from wbsync.jobs.fanout import FanOut, offset_ms
from wbsync.jobs.leader import FanOutLeases, Held
from wbsync.jobs.queue import SyncQueue
from wbsync.observability.metrics import sample
from wbsync.redis import keys
from wbsync.shared.runtime import Runtime
from wbsync.store.datasets import DATASETS
from wbsync.syncs import SYNCS, SyncOptions
from wbsync.system import clock

FINANCE = "rnp-finance-sync"


def leases(redis: Redis, prefix: str, owner: str, lease_ms: int = 60_000) -> FanOutLeases:
    return FanOutLeases(redis, prefix=prefix, lease_ms=lease_ms, owner=owner)


async def test_one_holder_per_queue_until_it_gives_up_or_its_lease_expires(
    redis: Redis, prefix: str
) -> None:
    a, b = leases(redis, prefix, "a", lease_ms=400), leases(redis, prefix, "b")

    assert (await a.hold(["q1", "q2"])).queues == ("q1", "q2")
    assert sample("wbsync_fanout_leader", queue="q1") == 1
    assert (await b.hold(["q1", "q2", "q3"])).queues == ("q3",)  # q3 was free
    assert (await a.hold(["q1"])).queues == ("q1",)  # extends its own
    await a.release(["q2"])
    assert (await b.hold(["q2"])).queues == ("q2",)  # given up: taken at once
    await b.release(["q1"])  # not b's: untouched
    assert await redis.get(keys.fanout_lease_key(prefix, "q1")) == "a"
    # a stops extending (it died): its lease expires and b takes over.
    await wait_for(lambda: _holds(b, "q1"))


async def _holds(lease: FanOutLeases, queue: str) -> bool:
    return queue in (await lease.hold([queue])).queues


async def test_two_fanouts_enqueue_once_and_a_new_leader_keeps_the_schedule(
    redis_url: str, redis: Redis, prefix: str
) -> None:
    queue = SyncQueue("qlead", redis_url=redis_url, prefix=f"{prefix}:q")
    # Two cabinets whose time in the hour is at least ten minutes away: none comes in the test.
    now_ms = clock.now_ms()
    far = [
        c
        for c in (f"c{i}" for i in range(100))
        if (offset_ms(c, "qlead", 3_600_000) - now_ms) % 3_600_000 > 600_000
    ][:2]

    async def cabinets() -> list[str]:
        return far

    first = FanOut({"qlead": queue}, cabinets, {"qlead": 3600.0})
    second = FanOut({"qlead": queue}, cabinets, {"qlead": 3600.0})
    stop_first, stop_second = asyncio.Event(), asyncio.Event()
    lease_a = leases(redis, prefix, "a", lease_ms=300)
    lease_b = leases(redis, prefix, "b", lease_ms=300)
    try:
        running_a = asyncio.create_task(first.run(stop_first, lease_a))
        await wait_for(lambda: _through(lease_a, "qlead"))
        fanned_at = await _through(lease_a, "qlead")
        assert (await queue.counts())["waiting"] == 2  # never fanned out: every cabinet at once
        await queue.obliterate()  # as if both jobs had completed
        running_b = asyncio.create_task(second.run(stop_second, lease_b))
        stop_first.set()  # the leader stops (and gives up its lease)
        await running_a
        await wait_for(lambda: _holds(lease_b, "qlead"))
        await wait_for(lambda: sample("wbsync_fanout_leader", queue="qlead") == 1)
        # b leads now and goes on from a's schedule: neither cabinet's time has come, so it
        # enqueues nothing.
        await wait_for(lambda: _through_past(lease_b, "qlead", fanned_at))
        assert (await queue.counts())["waiting"] == 0
        stop_second.set()
        await running_b
        assert await redis.get(keys.fanout_lease_key(prefix, "qlead")) is None  # given up
    finally:
        stop_first.set()
        stop_second.set()
        await queue.obliterate()
        await queue.close()


async def test_only_the_leader_runs_the_lead_hook_with_the_queues_it_leads(
    redis_url: str, redis: Redis, prefix: str
) -> None:
    queue = SyncQueue("qhook", redis_url=redis_url, prefix=f"{prefix}:q")
    calls: dict[str, list[tuple[str, ...]]] = {"a": [], "b": []}

    async def cabinets() -> list[str]:
        return []

    def hook(name: str) -> Any:
        async def on_lead(queues: Sequence[str]) -> None:
            calls[name].append(tuple(queues))

        return on_lead

    first = FanOut({"qhook": queue}, cabinets, {"qhook": 3600.0}, on_lead=hook("a"))
    second = FanOut({"qhook": queue}, cabinets, {"qhook": 3600.0}, on_lead=hook("b"))
    stop = asyncio.Event()
    try:
        running_a = asyncio.create_task(first.run(stop, leases(redis, prefix, "a", lease_ms=300)))
        await wait_for(lambda: calls["a"])
        running_b = asyncio.create_task(second.run(stop, leases(redis, prefix, "b", lease_ms=300)))
        seen = len(calls["a"])
        await wait_for(lambda: len(calls["a"]) >= seen + 3)  # several polls of both
        assert set(calls["a"]) == {("qhook",)}
        assert calls["b"] == []
        stop.set()
        await asyncio.gather(running_a, running_b)
    finally:
        stop.set()
        await queue.obliterate()
        await queue.close()


async def _through(lease: FanOutLeases, queue: str) -> int | None:
    return (await lease.through_ms([queue]))[queue]


async def _through_past(lease: FanOutLeases, queue: str, at: int | None) -> bool:
    through = await _through(lease, queue)
    return through is not None and at is not None and through > at


def test_queue_concurrency_per_queue_with_a_default_and_clear_errors() -> None:
    settings = Settings(queue_concurrency={FINANCE: 12}, sync_queue_concurrency=3)
    assert queue_option(settings, FINANCE, "concurrency") == 12
    assert queue_option(settings, "catalog-sync", "concurrency") == 3
    # A queue no loaded plugin declares is not loaded here: named, never refused.
    assert check(Settings(queue_concurrency={"finance": 2})) == []
    notice = not_loaded_here(Settings(queue_concurrency={"finance": 2}))
    assert notice is not None
    assert notice.startswith("WBSYNC_QUEUE_CONCURRENCY: queue(s) ['finance'] not loaded here")
    with pytest.raises(ValidationError, match=f"{FINANCE}: give each queue at least 1 job at once"):
        Settings(queue_concurrency={FINANCE: 0})


def test_a_sync_with_a_figure_of_its_own_runs_that_many_unless_its_queue_is_named() -> None:
    booking = "booking-slot-monitor"
    assert SYNCS[booking].concurrency == 10
    assert queue_option(Settings(sync_queue_concurrency=3), booking, "concurrency") == 10
    assert queue_option(Settings(queue_concurrency={booking: 4}), booking, "concurrency") == 4
    assert queue_option(Settings(sync_queue_concurrency=3), FINANCE, "concurrency") == 3
    with pytest.raises(ValueError, match="booking-slot-monitor: concurrency must be >= 1, got 0"):
        dataclasses.replace(SYNCS[booking], concurrency=0)


SCALE = 0.005  # WB's minute is 300 ms
SECRET = "leader-test-secret"
SELLERS = [f"0000000{i}-0000-4000-8000-00000000000a" for i in range(1, 4)]
LEASE_MS = 900


@pytest.fixture
async def emulator() -> AsyncIterator[Emulator]:
    config = EmulatorConfig(
        time_scale=SCALE,
        grace_ms=100,  # a loaded machine delays a request after its token was taken
        anchor_date=clock.wb_today(),
        sizes=SellerSizes(report_rows=36),
        page_size={"finance.detailed_report": 6},
    )
    async with running_emulator(config) as emu:
        yield emu


def _finance_rows(emu: Emulator, seller: str) -> int:
    rows = expected_datasets(emu, seller, today=clock.wb_today(), options=SyncOptions())
    return len({DATASETS["finance_report"].row_key(r) for r in rows["finance_report"]})


async def _leader_pid(redis: Redis, prefix: str) -> int | None:
    owner = await redis.get(keys.fanout_lease_key(prefix, FINANCE))
    return int(str(owner).split(":")[-2]) if owner else None


@pytest.mark.long
async def test_leader_killed_mid_run_another_takes_over_without_an_enqueue_storm(
    redis_url: str,
    redis: Redis,
    prefix: str,
    database_factory: DatabaseFactory,
    emulator: Emulator,
    tmp_path: Path,
) -> None:
    # One backend is enough here (this is about processes); no other test's cabinets.
    database_url = await database_factory.new_url("sqlite")
    settings = Settings(
        redis_prefix=prefix,
        database_url=database_url,
        secret_key=SecretStr(SECRET),
        wb_base_url=emulator.base_url,
        time_scale=SCALE,
    )
    runtime = await Runtime(settings, redis_url=redis_url).start()
    procs: dict[int, asyncio.subprocess.Process] = {}
    try:
        cabinets = [
            await runtime.store.cabinets.add(f"shop-{i}", emulator.token(s), s)
            for i, s in enumerate(SELLERS)
        ]
        env = {
            **os.environ,
            "WBSYNC_REDIS_URL": redis_url,
            "WBSYNC_REDIS_PREFIX": prefix,
            "WBSYNC_DATABASE_URL": database_url,
            "WBSYNC_SECRET_KEY": SECRET,
            "WBSYNC_WB_BASE_URL": emulator.base_url,
            "WBSYNC_TIME_SCALE": str(SCALE),
            "WBSYNC_LEADER_LEASE_MS": str(LEASE_MS),
            "WBSYNC_JOB_LOCK_MS": "1000",  # the killed leader's jobs are taken over soon
            "WBSYNC_FANOUT_INTERVALS_S": f'{{"{FINANCE}": 1000000}}',  # one pass in the test
        }
        command = [sys.executable, "-m", "wbsync", "run", "--queues", FINANCE]
        for i in range(2):
            with (tmp_path / f"run-{i}.log").open("wb") as log:
                proc = await asyncio.create_subprocess_exec(*command, env=env, stderr=log)
            procs[proc.pid] = proc
        await wait_for(lambda: _leader_pid(redis, prefix))
        leader = await _leader_pid(redis, prefix)
        assert leader in procs
        # Mid-run: some pages stored, not all.
        await wait_for(lambda: _rows_at_least(runtime, cabinets, 12))

        procs[leader].kill()  # SIGKILL: its lease is neither extended nor given up
        await procs.pop(leader).wait()
        [(survivor, proc)] = procs.items()
        # The lease runs out and the survivor's next poll (a third of it) takes it; the deadline
        # leaves room for a loaded machine.
        await wait_for(
            lambda: _is_leader(redis, prefix, survivor), timeout_s=LEASE_MS / 1000 * 4 / 3 + 5
        )

        expected = sum(_finance_rows(emulator, s) for s in SELLERS)
        await wait_for(lambda: _rows_exact(runtime, cabinets, expected), timeout_s=60)
        queue = runtime.queue(FINANCE)
        await wait_for(lambda: _no_live_jobs(queue))
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0
    finally:
        for left in procs.values():
            if left.returncode is None:
                left.kill()
                await left.wait()
        await runtime.aclose()

    passes = [
        line
        for i in range(2)
        for line in (tmp_path / f"run-{i}.log").read_text().splitlines()
        if f"fan-out {FINANCE}:" in line
    ]
    assert len(passes) == 1, passes  # one fan-out pass in all: no second leader, no re-run
    added = await _events(redis, prefix, "added")
    assert added == len(SELLERS)  # each cabinet enqueued once
    # A run killed mid-request and taken over shares its buckets: no burst of 429s. One per
    # seller at most, from a busy machine's jitter (a request that reached WB a little early).
    assert emulator.counters.total("rate_limited") <= len(SELLERS)


async def _is_leader(redis: Redis, prefix: str, pid: int) -> bool:
    return await _leader_pid(redis, prefix) == pid


async def _rows(runtime: Runtime, cabinets: list[Any]) -> int:
    return sum([await runtime.store.count("finance_report", c.id) for c in cabinets])


async def _rows_at_least(runtime: Runtime, cabinets: list[Any], rows: int) -> bool:
    return await _rows(runtime, cabinets) >= rows


async def _rows_exact(runtime: Runtime, cabinets: list[Any], expected: int) -> bool:
    return await _rows(runtime, cabinets) == expected


async def _no_live_jobs(queue: SyncQueue) -> bool:
    return not await queue.live_jobs()


async def _events(redis: Redis, prefix: str, event: str) -> int:
    stream = f"{keys.queue_prefix(prefix)}:{keys.bullmq_queue_name(FINANCE)}:events"
    entries: list[tuple[str, dict[str, str]]] = await redis.xrange(stream)  # type: ignore[assignment]
    return sum(1 for _, fields in entries if fields.get("event") == event)


async def test_a_follower_polls_the_lease_at_its_pace_past_the_failed_job_look_up(
    redis_url: str, redis: Redis, prefix: str
) -> None:
    """A process that leads nothing still waits a poll between lease checks once the time
    for looking at failed jobs has passed (it used to spin on the lease from then on)."""
    queue = SyncQueue("qfollow", redis_url=redis_url, prefix=f"{prefix}:q")

    async def no_cabinets() -> list[str]:
        return []

    look_every_s = 0.05  # failed jobs are looked at every quarter of failed_retry_s
    follower = FanOut(
        {"qfollow": queue}, no_cabinets, {"qfollow": 3600.0}, failed_retry_s=4 * look_every_s
    )
    await redis.set(keys.fanout_lease_key(prefix, "qfollow"), "another process", px=60_000)
    lease = _CountingLeases(redis, prefix=prefix, lease_ms=3000, owner="b")  # a poll a second
    stop = asyncio.Event()
    running = asyncio.create_task(follower.run(stop, lease))
    try:
        started = clock.monotonic()
        await asyncio.sleep(10 * look_every_s)  # the time under test: ten look-up periods
        elapsed = clock.monotonic() - started
    finally:
        stop.set()
        await running
        await queue.close()
    assert lease.held == []  # it never led
    # One check at the start, then one a poll; a spinning loop makes thousands.
    assert 1 <= lease.holds <= 2 + elapsed / lease.poll_s, lease.holds


class _CountingLeases(FanOutLeases):
    """The real leases, counting how often the fan-out checks them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.holds = 0
        self.held: list[str] = []

    async def hold(self, queues: Sequence[str]) -> Held:
        self.holds += 1
        result = await super().hold(queues)
        self.held += result.queues
        return result
