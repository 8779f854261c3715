"""Retention by date on a scaled calendar: the syncs keep adding new days (the emulator's days
roll with the calendar) while the retention pass removes the days that aged out and, a grace
later, the tombstones (real emulator, real Redis limiter, real database)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta

import pytest
from sqlalchemy import func, select

from tests.support.limiter import LimiterFactory
from tests.support.waiting import wait_for
from wbsync.cabinets.pruning import Pruner
from wbsync.config import Settings
from wbsync.emulator.config import EmulatorConfig, SellerSizes
from wbsync.emulator.server import Emulator, running_emulator
from wbsync.shared.runtime import client_options
from wbsync.store import Store
from wbsync.store.datasets import dataset
from wbsync.store.schema import dataset_table
from wbsync.syncs import SYNCS, SyncInput, SyncOptions, run_sync
from wbsync.system import clock
from wbsync.wb.client import WbClient

# A calendar day in 0.26 real seconds: the coefficients' 30 days of retention in about 8 s.
SCALE = 0.000003
SELLER = "5b7d1e0a-2c3f-4a1b-8d9e-0f1a2b3c4d5e"
SYNC = "booking-slot-monitor"
DATASET = dataset("acceptance_coefficients")


@pytest.fixture
def origin() -> Iterator[datetime]:
    """The scaled calendar's origin, shared by this process and the emulator (then real again)."""
    start = datetime.now(UTC)
    clock.set_calendar(start, SCALE)
    yield start
    clock.set_calendar(None)


async def _sync(emu: Emulator, store: Store, limiters: LimiterFactory, cabinet_id: int) -> int:
    settings = Settings(wb_base_url=emu.base_url, time_scale=SCALE)
    async with WbClient(
        "shop", emu.token(SELLER), limiters(time_scale=SCALE), options=client_options(settings)
    ) as client:
        inp = SyncInput(client, store, cabinet_id, None, clock.wb_today(), SyncOptions())
        return (await run_sync(SYNCS[SYNC], inp)).tombstoned


async def _dates(store: Store, *, deleted: bool) -> list[date]:
    table = dataset_table(DATASET)
    tombstone = table.c.deleted_at.is_not(None) if deleted else table.c.deleted_at.is_(None)
    async with store.database.connection() as conn:
        found = await conn.scalars(select(table.c.date).where(tombstone).distinct())
        return sorted(date.fromisoformat(d) for d in found)


async def _count(store: Store) -> int:
    table = dataset_table(DATASET)
    async with store.database.connection() as conn:
        return int(await conn.scalar(select(func.count()).select_from(table)) or 0)


@pytest.mark.long
async def test_days_age_out_of_retention_while_the_sync_adds_new_ones(
    origin: datetime, store: Store, limiter_factory: LimiterFactory
) -> None:
    keep = DATASET.retention_days
    assert keep is not None
    config = EmulatorConfig(
        time_scale=SCALE,
        anchor_date=origin.date(),
        calendar_origin=origin,
        sizes=SellerSizes(products=2, warehouses=2),
        serve_disabled_in_docs=True,
    )
    async with running_emulator(config) as emu:
        cabinet_id = (await store.cabinets.add("shop", emu.token(SELLER), SELLER)).id
        pruner = Pruner(store, interval_s=0.001, datasets={SYNC: (DATASET,)})
        await _sync(emu, store, limiter_factory, cabinet_id)
        first = await _dates(store, deleted=False)
        assert len(first) == 14  # the emulator's coming 14 days from the calendar's today
        assert first[0] >= origin.date()

        # Past the first days' retention: the next poll sees only new days, the old ones become
        # tombstones, and the retention pass removes those older than the retention.
        await wait_for(lambda: clock.today() > first[0] + timedelta(days=keep + 2), timeout_s=120)
        assert await _sync(emu, store, limiter_factory, cabinet_id) == 14 * 2 * 2
        live = await _dates(store, deleted=False)
        assert live[0] > first[-1]  # new days only
        stored = await _count(store)
        cutoff = clock.today() - timedelta(days=keep)
        await pruner.on_lead([SYNC])
        await wait_for(lambda: pruner.passes == 1)
        assert await _count(store) < stored  # the aged days went...
        kept = await _dates(store, deleted=True)
        assert all(day >= cutoff for day in kept)  # ...every stored day is within retention
        assert await _dates(store, deleted=False) == live  # the live days stayed

        # A tombstone's grace also runs on the calendar: past it, the next pass removes them.
        grace = DATASET.tombstone_grace_days
        passed = clock.today() + timedelta(days=grace + 1)
        await wait_for(lambda: clock.today() > passed, timeout_s=120)
        await pruner.on_lead([SYNC])
        await wait_for(lambda: pruner.passes == 2)
        assert await _dates(store, deleted=True) == []
        assert await _dates(store, deleted=False) == live
        await pruner.aclose()


async def test_a_closed_pruner_starts_no_pass(store: Store) -> None:
    # A process's stop closes the pruner; a lead the fan-out was in the middle of must not start
    # a pass on the database the stop closes next.
    pruner = Pruner(store, interval_s=0.001, datasets={SYNC: (DATASET,)})
    await pruner.aclose()
    await pruner.on_lead([SYNC])
    assert not [t for t in asyncio.all_tasks() if t.get_name() == "prune"]
    assert pruner.passes == 0
