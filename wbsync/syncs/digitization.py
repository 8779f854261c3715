"""digitization-sync: sales-funnel history per item and day (analytics), 20 items a call.

The funnel is asked for by item (nmID), so the run first lists the cabinet's items from the
content cards list (saving its position as it goes), then pulls the history.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import date, timedelta
from typing import Any

from wbsync.store.datasets import Dataset, KeyField
from wbsync.syncs.base import (
    CardsPosition,
    Count,
    Cursor,
    CursorShape,
    Flag,
    Sync,
    SyncInput,
    SyncPage,
    optional,
)
from wbsync.values.scope import Limit
from wbsync.wb.client import WbClient
from wbsync.wb.endpoints import Endpoint, TypeLimits
from wbsync.wb.methods import CONTENT_CARDS_LIST, cards
from wbsync.wb.paging import Page, Row, batch_pages, rows_at
from wbsync.wb.sections import ANALYTICS
from wbsync.wb.tokens import Category

ANALYTICS_SALES_FUNNEL_HISTORY = Endpoint(
    name="analytics.sales_funnel_history",
    section=ANALYTICS,
    method="POST",
    path="/api/analytics/v3/sales-funnel/products/history",
    group="analytics.sales_funnel_history",
    category=Category.ANALYTICS,
    limits=TypeLimits.same(Limit(60.0, 3, 3), base=Limit(3600.0, 2, 1)),
)

FUNNEL_HISTORY = Dataset(
    name="funnel_history",
    source="POST /api/analytics/v3/sales-funnel/products/history (one row per item per day)",
    key=(KeyField("nm_id", "product.nmId"), KeyField("date", "date", "date")),
    retention_days=400,
)


def funnel_history_rows(item: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Split one sales-funnel history item into stored rows, one per day.

    Each row is a ``history[]`` element as WB sent it plus the item's ``product`` object and
    ``currency``.
    """
    history: Sequence[Mapping[str, Any]] = item.get("history") or ()
    extra = {"product": item.get("product"), "currency": item.get("currency")}
    return [{**day, **extra} for day in history]


def funnel_history(
    client: WbClient, *, nm_ids: Sequence[int], start: date, end: date, aggregation: str = "day"
) -> AsyncIterator[Page]:
    """Sales-funnel history of ``nm_ids``, 20 per call; the cursor is how many ids are done."""
    ep = ANALYTICS_SALES_FUNNEL_HISTORY

    async def fetch(batch: Sequence[int]) -> list[Row]:
        body = {
            "nmIds": list(batch),
            "aggregationLevel": aggregation,
            "selectedPeriod": {"start": start.isoformat(), "end": end.isoformat()},
        }
        return rows_at(await client.call(ep, json=body), ep)

    return batch_pages(list(nm_ids), 20, fetch)


class DigitizationCursor(CursorShape):
    """Still listing the items (and where), the items found, how many have their history."""

    listing: Flag = optional()
    cards: CardsPosition | None = optional()
    nm_ids: list[Count] = optional()
    done: Count = optional()


async def pages(inp: SyncInput) -> AsyncIterator[SyncPage]:
    """Items from the cards list, then their funnel history over the stats window."""
    cursor: Cursor = {"listing": True, "cards": None, "nm_ids": [], "done": 0}
    cursor.update(inp.cursor or {})
    if cursor["listing"]:
        async for page in cards(inp.client, cursor=cursor["cards"]):
            nm_ids = [*cursor["nm_ids"], *(card["nmID"] for card in page.rows)]
            cursor = {**cursor, "cards": page.cursor, "nm_ids": nm_ids}
            yield SyncPage.checkpoint(cursor)
        cursor = {**cursor, "listing": False}
        yield SyncPage.checkpoint(cursor)
    nm_ids, done = list(cursor["nm_ids"]), int(cursor["done"])
    start = inp.today - timedelta(days=inp.options.funnel_days - 1)
    async for page in funnel_history(inp.client, nm_ids=nm_ids[done:], start=start, end=inp.today):
        rows = [row for item in page.rows for row in funnel_history_rows(item)]
        yield SyncPage("funnel_history", rows, {**cursor, "done": done + int(page.cursor)})


SYNC = Sync(
    name="digitization-sync",
    calls=(CONTENT_CARDS_LIST, ANALYTICS_SALES_FUNNEL_HISTORY),
    long=True,
    interval_s=3600,
    stores=(FUNNEL_HISTORY,),
    pages=pages,
    cursor=DigitizationCursor,
)
