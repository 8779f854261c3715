"""Fleet-wide syncs on the emulator over HTTP: WB's tariffs are fetched once per interval for the
whole fleet whatever its size (one fan-out entry, one job, the same requests on the emulator's
journal), with the token of a cabinet that may ask: never a suspended one, one without what the
methods need, or one WB refuses; the rows are stored once, as WB's."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import SecretStr
from redis.asyncio import Redis

from tests.support.api import API_KEY
from tests.support.databases import DatabaseFactory
from tests.support.runtimes import runtime_maker
from tests.support.waiting import wait_for
from wbsync.cabinets.suspending import SuspensionGate
from wbsync.composition.fleet import CARRIERS_TRIED, FLEET_JOB, FleetCarriers
from wbsync.composition.service import TokenGaps
from wbsync.composition.workers import build_workers
from wbsync.emulator import Emulator, EmulatorConfig, SellerSizes, running_emulator
from wbsync.jobs.fanout import FanOut, FanOutReport
from wbsync.jobs.handle import JobHandle
from wbsync.jobs.leader import FanOutLeases
from wbsync.jobs.model import Outcome
from wbsync.jobs.queue import SyncQueue
from wbsync.jobs.worker import SyncWorker
from wbsync.shared.runtime import Runtime
from wbsync.store import Cabinet
from wbsync.syncs import SYNCS
from wbsync.system import clock
from wbsync.wb.tokens import token_expiry

SCALE = 0.005  # WB's hour is 18 s: one interval of the tariffs' queue spans the test
TARIFFS = "wb-tariffs-sync"
METHODS = ("tariffs.box", "tariffs.pallet", "tariffs.return", "tariffs.commission")


def _seller(i: int) -> str:
    return f"0000000f-0000-4000-8000-{i:012d}"


@pytest.fixture
async def emulator() -> AsyncIterator[Emulator]:
    config = EmulatorConfig(
        time_scale=SCALE, anchor_date=clock.wb_today(), sizes=SellerSizes(products=2)
    )
    async with running_emulator(config) as emu:
        yield emu


@pytest.fixture
async def runtime(
    redis_url: str,
    prefix: str,
    database_factory: DatabaseFactory,
    db_backend: str,
    emulator: Emulator,
) -> AsyncIterator[Runtime]:
    url = await database_factory.new_migrated_url(db_backend)
    async with runtime_maker(
        redis_url,
        prefix,
        url,
        emulator.base_url,
        time_scale=SCALE,
        api_keys=[SecretStr(API_KEY)],
        # One interval for the whole test: the turn starts at the first cabinet (by id).
        fanout_intervals_s={TARIFFS: 1e12},
    ) as make:
        yield await make()


async def _add(runtime: Runtime, emulator: Emulator, i: int, **token: Any) -> Cabinet:
    raw = emulator.token(_seller(i), **token)
    name = f"cab-{i}-{uuid.uuid4().hex[:6]}"
    return await runtime.store.cabinets.add(
        name, raw, _seller(i), token_expires_at=token_expiry(raw)
    )


async def _run_fleet(runtime: Runtime) -> tuple[FanOutReport, list[Outcome]]:
    """One fan-out pass of the tariffs' queue, its job run to its end."""
    gaps = TokenGaps(runtime)
    queue = runtime.queue(TARIFFS)
    fanout = FanOut(
        {TARIFFS: queue}, gaps.active_ids, {TARIFFS: 3600.0}, serves=gaps.serves, fleet=[TARIFFS]
    )
    outcomes: list[Outcome] = []
    [worker] = build_workers(runtime, [TARIFFS], concurrency=1, on_outcome=outcomes.append)

    async def gone() -> bool:
        job = await queue.job(FLEET_JOB)
        return job is None or job.state == "failed"

    await worker.start()
    try:
        report = (await fanout.run_once([TARIFFS]))[TARIFFS]
        await wait_for(gone)
    finally:
        await worker.close()
    return report, outcomes


def _requests(emulator: Emulator) -> dict[tuple[str, str], int]:
    """The tariffs' requests on the emulator's journal, by (seller, method)."""
    return dict(
        Counter(
            (e["seller"], e["method"]) for e in emulator.counters.journal if e["method"] in METHODS
        )
    )


async def test_the_tariffs_are_fetched_once_per_interval_whatever_the_fleets_size(
    runtime: Runtime, emulator: Emulator
) -> None:
    await _add(runtime, emulator, 0)
    report, outcomes = await _run_fleet(runtime)
    assert (report.added, report.skipped_live) == (1, 0)
    one = _requests(emulator)
    assert sorted(one.values()) == [1, 1, 1, 1] and {m for _, m in one} == set(METHODS)
    assert [o.cabinet for o in outcomes] == [FLEET_JOB] and outcomes[0].outcome == "completed"

    for i in range(1, 20):
        await _add(runtime, emulator, i)
    emulator.counters.reset()
    report, outcomes = await _run_fleet(runtime)
    twenty = _requests(emulator)
    # One job for twenty cabinets, and the same four requests (by one carrier's token).
    assert report.added == 1 and sorted(twenty.values()) == [1, 1, 1, 1]
    assert len({seller for seller, _ in twenty}) == 1
    assert outcomes[-1].result["carrier"] in {c.id for c in await runtime.store.cabinets.list()}

    # Stored once (no cabinet), exactly as WB's rows: the same for every seller.
    store, today = runtime.store, clock.wb_today().isoformat()
    for dataset, method in (("tariffs_box", "tariffs.box"), ("tariffs_return", "tariffs.return")):
        expected = emulator.expected(_seller(7), method, end=today)
        assert expected == emulator.expected(_seller(3), method, end=today)
        stored = await store.fetch(dataset, None)
        by_name = sorted(expected, key=lambda r: r["warehouseName"])
        assert sorted(stored, key=lambda r: r["warehouseName"]) == by_name
    fees = emulator.expected(_seller(0), "tariffs.commission")
    assert await store.fetch("tariffs_commission", None) == sorted(
        fees, key=lambda r: r["subjectID"]
    )


async def test_the_carrier_is_never_suspended_nor_unable_and_the_turn_rotates(
    runtime: Runtime, emulator: Emulator
) -> None:
    test_token = await _add(runtime, emulator, 1, token_type="test")  # no sandbox for tariffs
    suspended = await _add(runtime, emulator, 2)
    section = await _add(runtime, emulator, 3)
    free = [await _add(runtime, emulator, i) for i in (4, 5, 6)]
    await runtime.store.suspended.suspend(
        suspended.id, None, kind="token", words="x", probe_at=None
    )
    await runtime.store.suspended.suspend(
        section.id, "tariffs", kind="payment", words="x", probe_at=None
    )
    sync = SYNCS[TARIFFS]
    gate = SuspensionGate(runtime.store, probe_ms=60_000.0)
    carriers = FleetCarriers(runtime, sync, gate, interval_ms=1e15)  # one turn for the test
    picked = await carriers.candidates()
    assert [c.id for c in picked] == [c.id for c in free]
    assert test_token.id not in {c.id for c in picked}

    # Each interval starts at the next unsuspended cabinet in turn (by id), then the others in
    # order; those that may not carry the run are passed over.
    pool = [test_token, *free]
    for interval_ms in (1e3, 7e3, 1e6):
        turns = FleetCarriers(runtime, sync, gate, interval_ms=interval_ms)
        before = int(clock.now_ms() // interval_ms)
        order = [c.id for c in await turns.candidates()]
        if before == int(clock.now_ms() // interval_ms):  # no interval ended meanwhile
            turn = before % len(pool)
            walk = pool[turn:] + pool[:turn]
            assert order == [c.id for c in walk if c.id != test_token.id]

    # A carrier whose bucket is spent goes last: the next one in turn carries the run.
    client = runtime.client(free[0])
    for ep in sync.calls:
        scope = client.scope(ep)
        while (await runtime.limiter.try_acquire(scope)).acquired:
            pass
    assert [c.id for c in await carriers.candidates()] == [free[1].id, free[2].id, free[0].id]


async def test_a_carrier_wb_refuses_is_suspended_and_the_next_one_carries_the_run(
    runtime: Runtime, emulator: Emulator
) -> None:
    first = await _add(runtime, emulator, 1)
    second = await _add(runtime, emulator, 2)
    emulator.revoke(first.token())
    report, outcomes = await _run_fleet(runtime)
    assert report.added == 1
    assert outcomes[-1].outcome == "completed" and outcomes[-1].result["carrier"] == second.id
    # The revoked token was refused (its first request), then the other's four went through.
    served = [(e["seller"], e["method"]) for e in emulator.counters.journal if e["status"] == 200]
    assert sorted(served) == sorted((_seller(2), m) for m in METHODS)
    [held] = await runtime.store.suspended.of_cabinet(first.id)
    assert held.section is None and held.kind == "token"
    assert await runtime.store.count("tariffs_commission") == len(
        emulator.expected(_seller(2), "tariffs.commission")
    )


async def test_the_fan_out_feeds_the_fleets_one_job_only_while_a_cabinet_serves_it(
    runtime: Runtime,
) -> None:
    queue = runtime.queue(TARIFFS)
    serving = {"1": False, "2": False}

    async def active() -> list[str]:
        return list(serving)

    fanout = FanOut(
        {TARIFFS: queue},
        active,
        {TARIFFS: 3600.0},
        serves=lambda _queue, cabinet: serving[cabinet],
        fleet=[TARIFFS],
    )
    assert (await fanout.run_once())[TARIFFS] == FanOutReport(added=0, skipped_live=0)
    serving["2"] = True
    assert (await fanout.run_once())[TARIFFS] == FanOutReport(added=1, skipped_live=0)
    assert (await fanout.run_once())[TARIFFS] == FanOutReport(added=0, skipped_live=1)
    job = await queue.job(FLEET_JOB)
    assert job is not None and job.state == "waiting"
    assert await queue.job("2") is None  # no cabinet's own job


async def test_a_run_considers_at_most_carriers_tried_cabinets(
    runtime: Runtime, emulator: Emulator
) -> None:
    added = [await _add(runtime, emulator, i) for i in range(CARRIERS_TRIED + 2)]
    gate = SuspensionGate(runtime.store, probe_ms=60_000.0)
    carriers = FleetCarriers(runtime, SYNCS[TARIFFS], gate, interval_ms=1e15)
    picked = await carriers.candidates()
    assert [c.id for c in picked] == [c.id for c in added[:CARRIERS_TRIED]]


async def test_the_fleets_scheduled_job_is_one_and_a_failed_one_is_enqueued_again(
    redis_url: str, redis: Redis, prefix: str
) -> None:
    queue = SyncQueue("fleet-again", redis_url=redis_url, prefix=f"{prefix}:q", attempts=1)
    runs: list[str] = []

    async def process(job: JobHandle) -> None:
        runs.append(job.cabinet)
        if len(runs) == 1:
            raise RuntimeError("first run fails")

    async def active() -> list[str]:
        return ["1", "2", "3"]

    worker = SyncWorker("fleet-again", process, redis_url=redis_url, prefix=f"{prefix}:q")
    # An hour's interval: the schedule enqueues the fleet's job once, only the failed-job retry
    # brings it back.
    fanout = FanOut(
        {"fleet-again": queue},
        active,
        {"fleet-again": 3600.0},
        failed_retry_s=0.4,
        fleet=["fleet-again"],
    )
    stop = asyncio.Event()
    await worker.start()
    task = asyncio.create_task(
        fanout.run(stop, FanOutLeases(redis, prefix=prefix, lease_ms=60_000))
    )
    try:
        await wait_for(lambda: len(runs) == 2)
    finally:
        stop.set()
        await task
        await worker.close()
        await queue.close()
    assert runs == [FLEET_JOB, FLEET_JOB]
