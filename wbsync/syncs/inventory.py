"""inventory-sync: the stocks report by WB warehouses, offset paging."""

from __future__ import annotations

from collections.abc import AsyncIterator

from wbsync.store.datasets import dataset
from wbsync.syncs.base import Count, CursorShape, Sync, SyncInput, SyncPage, optional
from wbsync.wb import endpoints as eps
from wbsync.wb import methods


class InventoryCursor(CursorShape):
    """The report's next offset."""

    offset: Count = optional()


async def pages(inp: SyncInput) -> AsyncIterator[SyncPage]:
    """Stock rows from the cursor's offset to the end of the report."""
    offset = int((inp.cursor or {}).get("offset", 0))
    async for page in methods.stocks(inp.client, offset=offset):
        yield SyncPage("stocks", page.rows, {"offset": page.cursor})


SYNC = Sync(
    name="inventory-sync",
    calls=(eps.ANALYTICS_STOCKS_WB_WAREHOUSES,),
    long=True,
    interval_s=30 * 60,
    stores=(dataset("stocks"),),
    pages=pages,
    cursor=InventoryCursor,
)
