"""rnp-sections-sync: statistics orders, then sales, paged by lastChangeDate (incremental)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime, time, timedelta
from typing import Annotated, Literal

from pydantic import AfterValidator

from wbsync.store.datasets import dataset
from wbsync.syncs.base import CursorShape, Sync, SyncInput, SyncPage, Text, optional
from wbsync.wb import endpoints as eps
from wbsync.wb import methods


def _moment(text: str) -> str:
    datetime.fromisoformat(text)  # ValueError: "Invalid isoformat string" names the value
    return text


#: A statistics ``dateFrom``: an ISO date and time.
Moment = Annotated[Text, AfterValidator(_moment)]


class SectionsCursor(CursorShape):
    """The phase, and per dataset the next ``dateFrom`` and the keys already pulled there."""

    phase: Literal["orders", "sales"] = optional()
    orders_from: Moment = optional()
    orders_seen: list[Text] = optional()
    sales_from: Moment = optional()
    sales_seen: list[Text] = optional()


async def pages(inp: SyncInput) -> AsyncIterator[SyncPage]:
    """Orders changed since the cursor, then sales; the next run starts where this one ended.

    Each dataset's cursor is the next ``dateFrom`` and the natural keys already pulled at that
    boundary (``<dataset>_seen``), so the overlap WB's paging needs is never stored twice.
    """
    # Moscow wall time, as WB reads dateFrom (and writes lastChangeDate): today is WB's.
    start = datetime.combine(inp.today - timedelta(days=inp.options.lookback_days), time())
    cursor = {"phase": "orders", "orders_from": start.isoformat(), "sales_from": start.isoformat()}
    cursor.update(inp.cursor or {})
    if cursor["phase"] == "orders":
        orders = methods.orders(
            inp.client, date_from=cursor["orders_from"], seen=cursor.get("orders_seen", ())
        )
        async for page in orders:
            cursor = {
                **cursor,
                "orders_from": page.cursor["from"],
                "orders_seen": page.cursor["seen"],
            }
            yield SyncPage("orders", page.rows, cursor)
        cursor = {**cursor, "phase": "sales"}
        yield SyncPage.checkpoint(cursor)
    sales = methods.sales(
        inp.client, date_from=cursor["sales_from"], seen=cursor.get("sales_seen", ())
    )
    async for page in sales:
        cursor = {**cursor, "sales_from": page.cursor["from"], "sales_seen": page.cursor["seen"]}
        yield SyncPage("sales", page.rows, cursor)
    yield SyncPage.checkpoint({**cursor, "phase": "orders"})


SYNC = Sync(
    name="rnp-sections-sync",
    calls=(eps.STATISTICS_ORDERS, eps.STATISTICS_SALES),
    long=True,
    interval_s=30 * 60,
    stores=(dataset("orders"), dataset("sales")),
    pages=pages,
    cursor=SectionsCursor,
    incremental=True,
)
