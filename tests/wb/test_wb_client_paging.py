"""Every emulated method, pulled whole through WbClient: exactly the generated rows, in order."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import date
from typing import Any

import pytest

from tests.support.wb import FAST, SELLER_A
from wbsync.config import Settings
from wbsync.emulator import SellerSizes, running_emulator
from wbsync.emulator.server import Emulator
from wbsync.ratelimit import RateLimiter
from wbsync.shared.runtime import client_options
from wbsync.syncs.ads import fullstats
from wbsync.syncs.bids import get_bids, set_bids
from wbsync.syncs.digitization import funnel_history
from wbsync.syncs.finance import finance_detailed_report
from wbsync.syncs.inventory import stocks
from wbsync.syncs.pricing import upload_prices
from wbsync.syncs.sections import orders, sales
from wbsync.wb import methods
from wbsync.wb.client import WbClient

ClientFactory = Callable[..., WbClient]
Row = dict[str, Any]


async def _pull(pages: AsyncIterator[methods.Page]) -> tuple[list[Row], int]:
    rows: list[Row] = []
    count = 0
    async for page in pages:
        rows += page.rows
        count += 1
    return rows, count


def _answered(emulator: Emulator) -> int:
    """Requests of SELLER_A that WB answered (not 429).

    At scale 0.001 a window is 60 ms and the emulator lets a request be early by 10 ms: on a
    busy machine the time between taking a token and the request arriving can exceed that, and
    the client retries the 429. That is pacing jitter, not paging; the pacing tests are
    test_wb_client_processes and test_flow."""
    return emulator.counters.total(seller=SELLER_A) - emulator.counters.total("rate_limited")


def _assert_exact(got: list[Row], expected: list[Row], key: str) -> None:
    assert got == expected
    keys = [r[key] for r in got]
    assert len(keys) == len(set(keys)), "duplicates"


async def test_finance_detailed_report(emulator: Emulator, client_factory: ClientFactory) -> None:
    async with client_factory() as client:
        pages = finance_detailed_report(
            client, date_from=date(2026, 7, 1), date_to=date(2026, 8, 17), limit=7
        )
        rows, n = await _pull(pages)
    expected = emulator.expected(
        SELLER_A, "finance.detailed_report", date_from="2026-07-01", date_to="2026-08-17"
    )
    assert n == 6 and len(expected) == 40
    _assert_exact(rows, expected, "rrdId")
    # Every page plus the final 204, once each (a 429 from scheduling jitter is retried).
    assert _answered(emulator) == 7


async def test_statistics_orders_and_sales(
    emulator: Emulator, client_factory: ClientFactory
) -> None:
    async with client_factory() as client:
        got_orders, n_orders = await _pull(orders(client, date_from="2026-07-01"))
        got_sales, n_sales = await _pull(sales(client, date_from="2026-07-01"))
    # Pages of 7 and 6 rows; the boundary batch (3 rows share a lastChangeDate) comes again.
    assert n_orders >= 30 // 7 and n_sales >= 20 // 6
    _assert_exact(
        got_orders, emulator.expected(SELLER_A, "statistics.orders", date_from="2026-07-01"), "srid"
    )
    _assert_exact(
        got_sales, emulator.expected(SELLER_A, "statistics.sales", date_from="2026-07-01"), "srid"
    )
    # Every page plus the one that brought nothing new.
    assert _answered(emulator) == n_orders + n_sales + 2


@pytest.mark.parametrize("reading", [">=", ">"])
@pytest.mark.parametrize(("batch", "page"), [(1, 4), (3, 4), (4, 5), (5, 7)])
async def test_statistics_pager_under_both_readings_of_date_from(
    limiter_factory: Callable[..., RateLimiter], reading: str, batch: int, page: int
) -> None:
    """Every row once and the pull ends, whether WB's dateFrom is ``>=`` or ``>`` and however
    a page boundary cuts a batch of rows sharing one lastChangeDate."""
    config = FAST.model_copy(
        update={
            "statistics_date_from": reading,
            "sizes": SellerSizes(orders=23, sales=0, batch=batch),
            "page_size": {"statistics.orders": page},
        }
    )
    async with running_emulator(config) as emu:
        settings = Settings(wb_base_url=emu.base_url, time_scale=config.time_scale)
        limiter = limiter_factory(time_scale=config.time_scale)
        expected = emu.expected(SELLER_A, "statistics.orders", date_from="2026-07-01")
        assert len(expected) == 23
        shared = [r["lastChangeDate"] for r in expected]
        assert batch == 1 or len(set(shared)) < len(shared)
        async with WbClient(
            "c", emu.token(SELLER_A), limiter, options=client_options(settings)
        ) as client:
            # Pull two pages, then resume from the saved cursor as a sync does.
            rows: list[Row] = []
            cursor: dict[str, Any] = {"from": "2026-07-01", "seen": []}
            async for first in orders(client, date_from=cursor["from"]):
                rows += first.rows
                cursor = first.cursor
                if len(rows) >= page:
                    break
            rest, _ = await _pull(orders(client, date_from=cursor["from"], seen=cursor["seen"]))
        _assert_exact(rows + rest, expected, "srid")


async def test_adverts_fullstats_and_bids(
    emulator: Emulator, client_factory: ClientFactory
) -> None:
    async with client_factory() as client:
        campaigns = await methods.adverts(client)
        assert campaigns == emulator.expected(SELLER_A, "promotion.adverts")
        ids = [c["id"] for c in campaigns]
        stats, _ = await _pull(
            fullstats(client, ids=ids, begin=date(2026, 8, 11), end=date(2026, 8, 17))
        )
        assert stats == emulator.expected(
            SELLER_A, "promotion.fullstats", begin="2026-08-11", end="2026-08-17"
        )
        pairs = [(c["id"], nm["nm_id"]) for c in campaigns for nm in c["nm_settings"] or []]
        bids, _ = await _pull(get_bids(client, pairs))
        expected = emulator.expected(SELLER_A, "promotion.get_bids")
        assert sorted(bids, key=repr) == sorted(expected, key=repr) and len(bids) == len(expected)
        first = bids[0]
        await set_bids(
            client,
            [
                {
                    "advert_id": first["advert_id"],
                    "nm_id": first["nm_id"],
                    "norm_query": first["norm_query"],
                    "bid": 999,
                }
            ],
        )
        again, _ = await _pull(get_bids(client, [(first["advert_id"], first["nm_id"])]))
    changed = next(b for b in again if b["norm_query"] == first["norm_query"])
    assert changed["bid"] == 999


async def test_funnel_history_in_batches_of_20(
    emulator: Emulator, client_factory: ClientFactory
) -> None:
    nm_ids = [c["nmID"] for c in emulator.expected(SELLER_A, "content.cards_list")]
    async with client_factory() as client:
        pages = funnel_history(
            client, nm_ids=nm_ids, start=date(2026, 8, 11), end=date(2026, 8, 17)
        )
        rows, n = await _pull(pages)
    assert n == 2  # 25 products, 20 per call
    expected = emulator.expected(
        SELLER_A, "analytics.sales_funnel_history", begin="2026-08-11", end="2026-08-17"
    )
    assert rows == expected


async def test_stocks_offset_paging(emulator: Emulator, client_factory: ClientFactory) -> None:
    async with client_factory() as client:
        rows, n = await _pull(stocks(client, limit=10))
    expected = emulator.expected(SELLER_A, "analytics.stocks_wb_warehouses")
    assert n == -(-len(expected) // 10)
    _assert_exact(rows, expected, "chrtId")


async def test_cards_cursor_paging(emulator: Emulator, client_factory: ClientFactory) -> None:
    async with client_factory() as client:
        rows, n = await _pull(methods.cards(client, limit=10))
    assert n == 3
    _assert_exact(rows, emulator.expected(SELLER_A, "content.cards_list"), "nmID")


async def test_cards_exact_multiple_of_limit_ends(
    emulator: Emulator, client_factory: ClientFactory
) -> None:
    async with client_factory() as client:
        rows, n = await _pull(methods.cards(client, limit=5))
    # 25 cards: five full pages, then an empty reply with total 0 < limit ends the pull.
    assert n == 5 and len(rows) == 25
    assert emulator.counters.total(seller=SELLER_A) == 6


async def test_goods_upload_then_list(emulator: Emulator, client_factory: ClientFactory) -> None:
    async with client_factory() as client:
        rows, n = await _pull(methods.goods(client, limit=10))
        assert n == 3
        _assert_exact(rows, emulator.expected(SELLER_A, "prices.goods_list"), "nmID")
        task = await upload_prices(client, [{"nmID": rows[0]["nmID"], "price": 4321}])
        after, _ = await _pull(methods.goods(client, limit=1000))
    assert isinstance(task, int)
    assert emulator.expected(SELLER_A, "prices.upload_task")[0]["id"] == task
    assert after[0]["sizes"][0]["price"] == 4321
    assert after == emulator.expected(SELLER_A, "prices.goods_list")


async def test_acceptance_coefficients(emulator: Emulator, client_factory: ClientFactory) -> None:
    async with client_factory() as client:
        rows = await methods.acceptance_coefficients(client)
        some = await methods.acceptance_coefficients(client, warehouse_ids=[507])
    assert rows == emulator.expected(SELLER_A, "tariffs.acceptance_coefficients")
    assert some and {r["warehouseID"] for r in some} == {507}
