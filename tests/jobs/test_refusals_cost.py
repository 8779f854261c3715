"""What a revoked cabinet costs WB at time scale, with every queue on a short interval and the
real fan-out loop and workers: its first jobs' requests, then at most one request per probe
interval (its token is dead: one whole-cabinet suspension, one probe)."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator

import pytest
from pydantic import SecretStr

from tests.support.api import API_KEY
from tests.support.databases import DatabaseFactory
from tests.support.runtimes import runtime_maker
from tests.support.waiting import wait_for
from wbsync.composition.service import TokenGaps
from wbsync.composition.workers import build_workers
from wbsync.emulator import Emulator, EmulatorConfig, SellerSizes, running_emulator
from wbsync.jobs.fanout import FanOut
from wbsync.jobs.leader import FanOutLeases
from wbsync.shared.runtime import Runtime
from wbsync.syncs import SYNCS
from wbsync.system import clock
from wbsync.wb.tokens import token_expiry

SCALE = 0.005
PROBE_S = 240.0  # scaled: 1.2 s, four fan-out intervals
INTERVAL_S = 60.0  # every queue every WB minute: 0.3 s
PROBES = 4  # run for this many probe intervals
SELLER = "0000000e-0000-4000-8000-0000000000cc"


@pytest.fixture
async def emulator() -> AsyncIterator[Emulator]:
    config = EmulatorConfig(
        time_scale=SCALE, anchor_date=clock.wb_today(), sizes=SellerSizes(report_rows=4)
    )
    async with running_emulator(config) as emu:
        yield emu


@pytest.fixture
async def runtime(
    redis_url: str, prefix: str, database_factory: DatabaseFactory, emulator: Emulator
) -> AsyncIterator[Runtime]:
    async with runtime_maker(
        redis_url,
        prefix,
        await database_factory.new_migrated_url("sqlite"),
        emulator.base_url,
        time_scale=SCALE,
        api_keys=[SecretStr(API_KEY)],
        suspension_probe_s=PROBE_S,
        fanout_intervals_s=dict.fromkeys(SYNCS, INTERVAL_S),
        leader_lease_ms=600,
    ) as make:
        yield await make()


async def test_a_revoked_cabinet_costs_at_most_one_request_per_probe_interval(
    runtime: Runtime, emulator: Emulator, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = emulator.token(SELLER)
    cabinet = await runtime.store.cabinets.add(
        "revoked", raw, SELLER, token_expires_at=token_expiry(raw)
    )
    emulator.revoke(raw)
    settings = runtime.settings
    gaps = TokenGaps(runtime)
    names = list(SYNCS)
    fanout = FanOut(
        {name: runtime.queue(name) for name in names},
        gaps.active_ids,
        {name: INTERVAL_S * SCALE for name in names},
        failed_retry_s=settings.failed_retry_s * SCALE,
        serves=gaps.serves,
    )
    leases = FanOutLeases(runtime.redis, prefix=settings.redis_prefix, lease_ms=600)
    workers = build_workers(runtime, names)
    stop = asyncio.Event()
    for worker in workers:
        await worker.start()
    fanning = asyncio.create_task(fanout.run(stop, leases))
    try:

        async def suspended() -> bool:
            return bool(await runtime.store.suspensions())

        await wait_for(suspended)
        [held] = await runtime.store.suspensions()
        first_burst = emulator.counters.total()
        started = time.time()
        probe_s = PROBE_S * SCALE
        await asyncio.sleep(PROBES * probe_s)  # the measured span itself, not a settling wait
    finally:
        stop.set()
        await fanning
        await asyncio.gather(*(worker.close() for worker in workers))

    assert (held.cabinet_id, held.section, held.kind) == (cabinet.id, None, "token")
    journal = [e for e in emulator.counters.journal if e["t"] > started]
    bound = math.ceil(PROBES) + 1  # a probe may fall at either end of the span
    assert len(journal) <= bound, journal
    assert all(e["status"] == 401 for e in journal)
    failed = [await runtime.queue(name).counts() for name in names]
    assert sum(c.get("failed", 0) for c in failed) == 0
    with capsys.disabled():
        print(
            f"\nrevoked cabinet, {len(names)} queues every {INTERVAL_S * SCALE:.1f} s: "
            f"{first_burst} request(s) before the suspension, then {len(journal)} in "
            f"{PROBES} probe intervals of {probe_s:.1f} s"
        )
