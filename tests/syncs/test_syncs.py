"""Each sync against the emulator stores exactly the generated data set (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import pytest

from tests.support.limiter import LimiterFactory
from wbsync.config import Settings
from wbsync.demo.expected import expected_datasets
from wbsync.emulator.config import EmulatorConfig, SellerSizes
from wbsync.emulator.server import Emulator, running_emulator
from wbsync.errors import MalformedJobError
from wbsync.shared.runtime import client_options
from wbsync.store import ChangeEvent, Store
from wbsync.store.datasets import DATASETS
from wbsync.store.ledger import PriceTarget
from wbsync.syncs import SYNCS, BidRule, SyncInput, SyncOptions, SyncPage, run_sync
from wbsync.syncs.runner import PageListener
from wbsync.wb.client import WbClient

SCALE = 0.001  # the finance report's minute is 60 ms
SELLER = "3f1c0a52-6b7e-4d2a-9c4e-1a2b3c4d5e6f"
# Small pages, so every paged method takes several. The cards list pages by the client's limit
# and the stocks report page by the client's (a shorter page is the end, as at WB), so
# the cards need enough products for two pages.
PAGES = {
    "finance.detailed_report": 15,
    "statistics.orders": 8,
    "statistics.sales": 8,
    "prices.goods_list": 10,
}
# Two windows of paid storage (8 days a task), one of paid acceptance: the whole shape, briefly.
OPTIONS = SyncOptions(
    lookback_days=30, stats_days=7, bid_rule=BidRule(target=400, step=50), report_horizon_days=16
)


@pytest.fixture
async def emulator() -> AsyncIterator[Emulator]:
    config = EmulatorConfig(
        time_scale=SCALE,
        page_size=PAGES,
        sizes=SellerSizes(products=130),
        serve_disabled_in_docs=True,  # the booking monitor polls acceptance coefficients
    )
    async with running_emulator(config) as emu:
        yield emu


async def run(
    name: str,
    emu: Emulator,
    store: Store,
    limiter_factory: LimiterFactory,
    *,
    on_page: PageListener | None = None,
) -> tuple[int, int]:
    cabinet = await store.cabinets.add("shop", emu.token(SELLER), SELLER)
    settings = Settings(wb_base_url=emu.base_url, time_scale=SCALE)
    async with WbClient(
        "shop",
        emu.token(SELLER),
        limiter_factory(time_scale=SCALE),
        options=client_options(settings),
    ) as client:
        inp = SyncInput(client, store, cabinet.id, None, emu.config.anchor_date, OPTIONS)
        totals = await run_sync(SYNCS[name], inp, on_page=on_page)
    return cabinet.id, totals.pages


def keyed(dataset: str, rows: Sequence[Mapping[str, Any]]) -> dict[tuple[Any, ...], Any]:
    spec = DATASETS[dataset]
    return {spec.row_key(row): row for row in rows}


async def assert_stored(
    store: Store, cabinet_id: int, dataset: str, expected: Sequence[Mapping[str, Any]]
) -> None:
    # A fleet-wide dataset's rows are nobody's: read with no cabinet.
    stored = await store.fetch(dataset, None if DATASETS[dataset].fleet else cabinet_id)
    assert len(stored) == len(expected) > 0
    assert keyed(dataset, stored) == keyed(dataset, expected)  # keys and content, row by row


def expected(name: str, emu: Emulator) -> dict[str, Sequence[Mapping[str, Any]]]:
    every = expected_datasets(emu, SELLER, today=emu.config.anchor_date, options=OPTIONS)
    return {dataset: every[dataset] for dataset in SYNCS[name].datasets}


@pytest.mark.parametrize("name", list(SYNCS))
async def test_sync_stores_exactly_the_generated_data(
    name: str, emulator: Emulator, store: Store, limiter_factory: LimiterFactory
) -> None:
    cursors: list[Any] = []

    async def saved(page: SyncPage, _event: ChangeEvent | None) -> None:
        cursors.append(page.cursor)

    cabinet_id, pages = await run(name, emulator, store, limiter_factory, on_page=saved)
    for dataset, rows in expected(name, emulator).items():
        await assert_stored(store, cabinet_id, dataset, rows)
    assert pages >= 1
    # Every cursor the sync wrote (as a job or the cursors table stores it) is of its shape.
    assert cursors
    for cursor in cursors:
        SYNCS[name].check_cursor(json.loads(json.dumps(cursor)))


@pytest.mark.parametrize(
    ("name", "cursor", "said"),
    [
        ("rnp-finance-sync", {"rrdId": "abc"}, "cursor field rrdId must be an integer, got 'abc'"),
        ("rnp-finance-sync", {"rrdId": True}, "cursor field rrdId must be an integer, got True"),
        ("rnp-finance-sync", {"rrdId": -5}, "cursor field rrdId must be greater than or equal"),
        ("rnp-finance-sync", {"rrdid": 5}, "cursor field rrdid is not a field of this cursor"),
        ("rnp-finance-sync", "abc", "cursor must be a JSON object, got 'abc'"),
        (
            "rnp-sections-sync",
            {"phase": 7},
            "cursor field phase must be 'orders' or 'sales', got 7",
        ),
        ("rnp-sections-sync", {"orders_from": "yesterday"}, "cursor field orders_from .*isoformat"),
        ("rnp-ads-sync", {"ids": [1, 2]}, "cursor field done is missing"),
        ("rnp-ads-sync", {"ids": ["1"], "done": 0}, "cursor field ids.0 must be an integer"),
        ("catalog-sync", {"position": {"nmID": 1}}, "cursor field position.updatedAt is missing"),
        ("inventory-sync", {"offset": 1.5}, "cursor field offset must be an integer, got 1.5"),
        ("booking-slot-monitor", {"offset": 1}, "cursor field offset is not a field"),
        (
            "autobidder-sync",
            {"pairs": [[1, 2, 3]], "done": 0, "applying": False, "applied_through": None},
            "cursor field pairs.0 ",
        ),
    ],
)
def test_a_cursor_wbsync_did_not_write_is_refused_naming_the_field(
    name: str, cursor: Any, said: str
) -> None:
    with pytest.raises(MalformedJobError, match=said) as refused:
        SYNCS[name].check_cursor(cursor)
    assert str(refused.value).startswith(f"{name}: ")
    assert "a cursor wbsync did not write is refused" in str(refused.value)


async def test_a_second_run_of_an_incremental_sync_adds_nothing_new(
    emulator: Emulator, store: Store, limiter_factory: LimiterFactory
) -> None:
    cabinet_id, first_pages = await run("rnp-sections-sync", emulator, store, limiter_factory)
    count = await store.count("orders", cabinet_id) + await store.count("sales", cabinet_id)
    cursor = await store.cursors.get(cabinet_id, "rnp-sections-sync")
    assert cursor is not None and cursor["phase"] == "orders"
    settings = Settings(wb_base_url=emulator.base_url, time_scale=SCALE)
    async with WbClient(
        "shop",
        emulator.token(SELLER),
        limiter_factory(time_scale=SCALE),
        options=client_options(settings),
    ) as client:
        inp = SyncInput(client, store, cabinet_id, cursor, emulator.config.anchor_date, OPTIONS)
        totals = await run_sync(SYNCS["rnp-sections-sync"], inp)
    assert totals.pages == 0
    assert await store.count("orders", cabinet_id) + await store.count("sales", cabinet_id) == count
    assert first_pages > 2


async def test_autobidder_and_pricing_record_what_they_sent(
    emulator: Emulator, store: Store, limiter_factory: LimiterFactory
) -> None:
    cabinet_id, _ = await run("autobidder-sync", emulator, store, limiter_factory)
    sent = await store.ledger.sent_bids(cabinet_id)
    assert sent and all(abs(s.new_bid - (s.old_bid or 0)) <= 50 for s in sent)
    assert all(150 <= s.new_bid <= 1000 for s in sent)

    goods = emulator.expected(SELLER, "prices.goods_list")
    targets = [PriceTarget(nm_id=g["nmID"], price=777, discount=10) for g in goods[:3]]
    await store.ledger.set_price_targets(cabinet_id, targets)
    settings = Settings(wb_base_url=emulator.base_url, time_scale=SCALE)
    async with WbClient(
        "shop",
        emulator.token(SELLER),
        limiter_factory(time_scale=SCALE),
        options=client_options(settings),
    ) as client:
        inp = SyncInput(client, store, cabinet_id, None, emulator.config.anchor_date, OPTIONS)
        await run_sync(SYNCS["pricing-bulk"], inp)
    uploads = await store.ledger.price_uploads(cabinet_id)
    assert [u.items_count for u in uploads] == [3]
    assert await store.ledger.price_targets(cabinet_id) == []
    assert emulator.expected(SELLER, "prices.upload_task")[0]["id"] == uploads[0].task_id
    stored = {row["nmID"]: row for row in await store.fetch("prices", cabinet_id)}
    assert all(stored[t.nm_id]["sizes"][0]["price"] == 777 for t in targets)
