"""inventory-sync: the stocks report by WB warehouses, offset paging."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from wbsync.store.datasets import Dataset, KeyField
from wbsync.syncs.base import Count, CursorShape, Sync, SyncInput, SyncPage, optional
from wbsync.values.scope import Limit
from wbsync.wb.client import WbClient
from wbsync.wb.endpoints import Endpoint, TypeLimits
from wbsync.wb.paging import Page, Row, offset_pages, rows_at
from wbsync.wb.sections import ANALYTICS
from wbsync.wb.tokens import Category

# WB lists Personal, Service and Base-with-secret tokens only: no Base row.
ANALYTICS_STOCKS_WB_WAREHOUSES = Endpoint(
    name="analytics.stocks_wb_warehouses",
    section=ANALYTICS,
    method="POST",
    path="/api/analytics/v1/stocks-report/wb-warehouses",
    group="analytics.stocks_wb_warehouses",
    category=Category.ANALYTICS,
    limits=TypeLimits.same(Limit(60.0, 3, 1), base=None),
)


def _object(**types: str) -> dict[str, Any]:
    """An object schema of the given properties' JSON types (the key fields are added)."""
    return {"type": "object", "properties": {name: {"type": t} for name, t in types.items()}}


# The whole stocks report (offset paging to its end): an item that left a warehouse is gone.
STOCKS = Dataset(
    name="stocks",
    source="POST /api/analytics/v1/stocks-report/wb-warehouses",
    key=(
        KeyField("nm_id", "nmId"),
        KeyField("chrt_id", "chrtId"),
        KeyField("warehouse_id", "warehouseId"),
    ),
    kind="snapshot",
    data_schema=_object(
        warehouseName="string",
        regionName="string",
        quantity="integer",
        inWayToClient="integer",
        inWayFromClient="integer",
    ),
)


def stocks(
    client: WbClient, *, limit: int = 250_000, offset: int = 0, nm_ids: Sequence[int] = ()
) -> AsyncIterator[Page]:
    """Stocks by WB warehouses, offset paging; the cursor is the next offset."""
    ep = ANALYTICS_STOCKS_WB_WAREHOUSES

    async def fetch(limit: int, offset: int) -> list[Row]:
        body: Row = {"limit": limit, "offset": offset}
        if nm_ids:
            body["nmIds"] = list(nm_ids)
        return rows_at(await client.call(ep, json=body), ep, "data", "items")

    return offset_pages(fetch, limit=limit, offset=offset)


class InventoryCursor(CursorShape):
    """The report's next offset."""

    offset: Count = optional()


async def pages(inp: SyncInput) -> AsyncIterator[SyncPage]:
    """Stock rows from the cursor's offset to the end of the report."""
    offset = int((inp.cursor or {}).get("offset", 0))
    async for page in stocks(inp.client, offset=offset):
        yield SyncPage("stocks", page.rows, {"offset": page.cursor})


SYNC = Sync(
    name="inventory-sync",
    calls=(ANALYTICS_STOCKS_WB_WAREHOUSES,),
    long=True,
    interval_s=30 * 60,
    stores=(STOCKS,),
    pages=pages,
    cursor=InventoryCursor,
)
