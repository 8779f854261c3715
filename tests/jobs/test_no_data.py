"""No data is not a failure: an ads job of a seller whose campaigns are paused or finished, or
have no statistics in the window, completes at its first attempt and stores what WB has."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from datetime import datetime, time, timedelta
from typing import Any

import pytest

from tests.support.databases import DatabaseFactory
from tests.support.runtimes import runtime_maker
from tests.support.waiting import wait_for
from wbsync.composition.workers import build_workers
from wbsync.demo.expected import expected_datasets
from wbsync.emulator import Emulator, EmulatorConfig, SellerSizes, running_emulator
from wbsync.jobs.model import Outcome
from wbsync.shared.runtime import Runtime
from wbsync.store.datasets import DATASETS
from wbsync.syncs import SyncOptions
from wbsync.system import clock

SCALE = 0.002  # fullstats' 20 s between requests is 40 ms
QUEUE = "rnp-ads-sync"
SOME = "00000a11-0000-4000-8000-000000000001"  # paused or finished, some recently
NONE = "00000a11-0000-4000-8000-000000000002"  # paused or finished, all before the window
PAUSED, FINISHED = 11, 7


@pytest.fixture
async def emulator() -> AsyncIterator[Emulator]:
    config = EmulatorConfig(
        time_scale=SCALE, anchor_date=clock.wb_today(), sizes=SellerSizes(campaigns=60)
    )
    async with running_emulator(config) as emu:
        yield emu


@pytest.fixture
async def runtime(
    redis_url: str, prefix: str, database_factory: DatabaseFactory, emulator: Emulator
) -> AsyncIterator[Runtime]:
    database_url = await database_factory.new_migrated_url("sqlite")
    async with runtime_maker(
        redis_url, prefix, database_url, emulator.base_url, time_scale=SCALE
    ) as make:
        yield await make()


def _stop_every_campaign(emu: Emulator, seller: str, *, days_ago: Callable[[int], int]) -> None:
    """Pause or finish each of the seller's campaigns ``days_ago(i)`` days before today."""
    today = emu.config.today()
    for i, campaign in enumerate(emu.expected(seller, "promotion.adverts")):
        stopped = datetime.combine(today - timedelta(days=days_ago(i)), time(12))
        status = PAUSED if i % 2 else FINISHED
        emu.edit_campaign(seller, campaign["id"], status=status, updated=stopped)


async def _run(runtime: Runtime, emu: Emulator, seller: str) -> tuple[int, list[Outcome]]:
    name = f"cab-{uuid.uuid4().hex[:8]}"
    cabinet = await runtime.store.cabinets.add(name, emu.token(seller), seller)
    outcomes: list[Outcome] = []
    [worker] = build_workers(runtime, [QUEUE], concurrency=1, on_outcome=outcomes.append)
    queue = runtime.queue(QUEUE)
    await worker.start()
    try:
        await queue.enqueue(str(cabinet.id))

        async def ended() -> bool:
            job = await queue.job(str(cabinet.id))
            return job is None or job.state in ("completed", "failed")

        await wait_for(ended, timeout_s=120)
        job = await queue.job(str(cabinet.id))
    finally:
        await worker.close()
    # Completed (a completed job is removed), never failed: not one attempt spent.
    assert job is None or (job.state == "completed" and job.attempts_made == 0), job
    assert [o.outcome for o in outcomes if o.outcome != "deferred"] == ["completed"]
    return cabinet.id, outcomes


def _fullstats_status(emu: Emulator, seller: str) -> dict[str, int]:
    counts = emu.counters.snapshot()["sellers"][seller]
    status: dict[str, int] = counts["promotion.fullstats"]["status"]
    return status


async def _stored_stats(runtime: Runtime, cabinet_id: int) -> set[Any]:
    spec = DATASETS["advert_stats"]
    return {spec.row_key(r) for r in await runtime.store.fetch("advert_stats", cabinet_id)}


def _expected_stats(emu: Emulator, seller: str) -> set[Any]:
    spec = DATASETS["advert_stats"]
    rows = expected_datasets(emu, seller, today=clock.wb_today(), options=SyncOptions())
    return {spec.row_key(r) for r in rows["advert_stats"]}


async def test_paused_and_finished_campaigns_complete_and_store_what_wb_has(
    runtime: Runtime, emulator: Emulator
) -> None:
    # Every other campaign stopped within the week's window, the rest long before it.
    _stop_every_campaign(emulator, SOME, days_ago=lambda i: 2 if i % 3 == 0 else 30)

    cabinet_id, _ = await _run(runtime, emulator, SOME)

    want = _expected_stats(emulator, SOME)
    assert want and await _stored_stats(runtime, cabinet_id) == want
    assert set(_fullstats_status(emulator, SOME)) <= {"200", "400", "429"}


async def test_campaigns_without_stats_in_the_window_are_no_data_not_a_failure(
    runtime: Runtime, emulator: Emulator
) -> None:
    _stop_every_campaign(emulator, NONE, days_ago=lambda _: 30)

    cabinet_id, _ = await _run(runtime, emulator, NONE)

    assert await _stored_stats(runtime, cabinet_id) == set() == _expected_stats(emulator, NONE)
    assert await runtime.store.count("adverts", cabinet_id) == 60
    # WB said "no companies with correct intervals" to every batch asked, and that was all.
    status = _fullstats_status(emulator, NONE)
    assert status.get("400", 0) >= 1 and "200" not in status
