"""Syncs against what WB's documents allow beyond the happy path: campaigns of every kind,
both readings of the statistics dateFrom."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Literal

import pytest

from tests.support.limiter import LimiterFactory
from wbsync.config import Settings
from wbsync.emulator import EmulatorConfig, SellerSizes, running_emulator
from wbsync.emulator.server import Emulator
from wbsync.shared.runtime import client_options
from wbsync.store import Store
from wbsync.syncs import SYNCS, BidRule, SyncInput, SyncOptions, run_sync
from wbsync.syncs.autobidder import ACTIVE
from wbsync.wb.client import WbClient

SCALE = 0.001
SELLER = "5d0e7c1a-2b3c-4d5e-8f90-a1b2c3d4e5f6"
OPTIONS = SyncOptions(bid_rule=BidRule(target=400, step=50))


@pytest.fixture
async def emulator() -> AsyncIterator[Emulator]:
    config = EmulatorConfig(time_scale=SCALE, sizes=SellerSizes(products=20, campaigns=20))
    async with running_emulator(config) as emu:
        yield emu


async def test_autobidder_bids_only_where_wb_allows_and_survives_a_refusal(
    emulator: Emulator,
    store: Store,
    limiter_factory: LimiterFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    campaigns = emulator.expected(SELLER, "promotion.adverts")
    active = [c for c in campaigns if c["status"] == ACTIVE]
    # WB's documents allow all of these, and the emulator serves them.
    assert any(c["nm_settings"] is None for c in active)
    kinds = {(c["bid_type"], c["settings"]["payment_type"]) for c in active}
    assert {("manual", "cpm"), ("manual", "cpc"), ("unified", "cpc")} <= kinds
    allowed = [
        c["id"]
        for c in active
        if (c["bid_type"], c["settings"]["payment_type"]) == ("manual", "cpm")
    ]
    assert len(allowed) == 2
    kept, changed = allowed
    bids_before = {
        (b["advert_id"], b["nm_id"], b["norm_query"]): b["bid"]
        for b in emulator.expected(SELLER, "promotion.get_bids")
    }

    cabinet = await store.cabinets.add("shop", emulator.token(SELLER), SELLER)
    settings = Settings(wb_base_url=emulator.base_url, time_scale=SCALE)
    limiter = limiter_factory(time_scale=SCALE)
    caplog.set_level(logging.WARNING, logger="wbsync.syncs.autobidder")
    async with WbClient(
        "shop", emulator.token(SELLER), limiter, options=client_options(settings)
    ) as client:
        inp = SyncInput(client, store, cabinet.id, None, emulator.config.anchor_date, OPTIONS)
        async for page in SYNCS["autobidder-sync"].pages(inp):
            if page.dataset is not None:
                await store.upsert(page.dataset, cabinet.id, page.rows)
            if page.dataset is None and page.cursor.get("applying"):
                # Between reading and writing, the seller switches one campaign to CPC.
                emulator.edit_campaign(SELLER, changed, payment_type="cpc")

    sent = await store.ledger.sent_bids(cabinet.id)
    assert sent and {s.advert_id for s in sent} == {kept}
    # Only the allowed campaigns' items were asked for; the refused campaign keeps its bids.
    asked = {r["advert_id"] for r in await store.fetch("bids", cabinet.id)}
    assert asked == {kept, changed}
    after = emulator.expected(SELLER, "promotion.get_bids")
    assert all(
        b["bid"] == bids_before[(b["advert_id"], b["nm_id"], b["norm_query"])]
        for b in after
        if b["advert_id"] != kept
    )
    refusals = [r for r in caplog.records if "refused" in r.getMessage()]
    assert refusals and all(str(changed) in r.getMessage() for r in refusals)
    assert "payment_type" in refusals[0].getMessage()
    # A Personal token writes with v1; WB refused the call whole, then each of that campaign's.
    set_bids = emulator.counters.snapshot()["sellers"][SELLER]["promotion.set_bids_v1"]
    assert set_bids["status"]["400"] == len(refusals) + 1  # the batch, then each refused bid
    notes = await store.column("bids", cabinet.id, "last_write_error")
    refused = {k: v for k, v in notes.items() if k[0] == changed}
    assert refused and all(v is not None and "payment_type" in v for v in refused.values())
    assert {k for k, v in notes.items() if k[0] == kept and v is None} == {
        (s.advert_id, s.nm_id, s.norm_query) for s in sent
    }


@pytest.mark.parametrize("reading", [">=", ">"])
async def test_sections_sync_pulls_every_row_once_under_both_readings_of_date_from(
    store: Store, limiter_factory: LimiterFactory, reading: Literal[">=", ">"]
) -> None:
    """rnp-sections-sync ends with every order and sale stored once, whether WB reads dateFrom
    as ``>=`` or ``>``, with batches cut by page boundaries; a second run adds nothing."""
    config = EmulatorConfig(
        time_scale=SCALE,
        statistics_date_from=reading,
        sizes=SellerSizes(orders=17, sales=13, batch=4),
        page_size={"statistics.orders": 6, "statistics.sales": 5},
    )
    async with running_emulator(config) as emu:
        cabinet = await store.cabinets.add("shop", emu.token(SELLER), SELLER)
        settings = Settings(wb_base_url=emu.base_url, time_scale=SCALE)
        limiter = limiter_factory(time_scale=SCALE)
        sync = SYNCS["rnp-sections-sync"]
        for run in range(2):
            cursor = await store.cursors.get(cabinet.id, sync.name)
            async with WbClient(
                "shop", emu.token(SELLER), limiter, options=client_options(settings)
            ) as client:
                inp = SyncInput(client, store, cabinet.id, cursor, config.anchor_date, OPTIONS)
                totals = await run_sync(sync, inp)
            assert (totals.rows > 0) == (run == 0)
        start = (config.anchor_date - timedelta(days=OPTIONS.lookback_days)).isoformat()
        for dataset, method, key in [
            ("orders", "statistics.orders", "srid"),
            ("sales", "statistics.sales", "saleID"),
        ]:
            stored = await store.fetch(dataset, cabinet.id)
            expected = emu.expected(SELLER, method, date_from=start)
            assert sorted(r[key] for r in stored) == sorted(r[key] for r in expected)
