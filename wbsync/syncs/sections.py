"""rnp-sections-sync: statistics orders, then sales, paged by lastChangeDate (incremental)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime, time, timedelta

from wbsync.syncs.base import Sync, SyncInput, SyncPage
from wbsync.wb import methods


async def pages(inp: SyncInput) -> AsyncIterator[SyncPage]:
    """Orders changed since the cursor, then sales; the next run starts where this one ended."""
    start = datetime.combine(inp.today - timedelta(days=inp.options.lookback_days), time())
    cursor = {"phase": "orders", "orders_from": start.isoformat(), "sales_from": start.isoformat()}
    cursor.update(inp.cursor or {})
    if cursor["phase"] == "orders":
        async for page in methods.orders(inp.client, date_from=cursor["orders_from"]):
            cursor = {**cursor, "orders_from": page.cursor}
            yield SyncPage("orders", page.rows, cursor)
        cursor = {**cursor, "phase": "sales"}
        yield SyncPage.checkpoint(cursor)
    async for page in methods.sales(inp.client, date_from=cursor["sales_from"]):
        cursor = {**cursor, "sales_from": page.cursor}
        yield SyncPage("sales", page.rows, cursor)
    yield SyncPage.checkpoint({**cursor, "phase": "orders"})


SYNC = Sync(
    name="rnp-sections-sync",
    long=True,
    interval_s=30 * 60,
    datasets=("orders", "sales"),
    pages=pages,
    incremental=True,
)
