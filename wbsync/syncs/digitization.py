"""digitization-sync: sales-funnel history per item and day (analytics), 20 items a call.

The funnel is asked for by item (nmID), so the run first lists the cabinet's items from the
content cards list (saving its position as it goes), then pulls the history.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

from wbsync.store.datasets import dataset, funnel_history_rows
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
from wbsync.wb import endpoints as eps
from wbsync.wb import methods


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
        async for page in methods.cards(inp.client, cursor=cursor["cards"]):
            nm_ids = [*cursor["nm_ids"], *(card["nmID"] for card in page.rows)]
            cursor = {**cursor, "cards": page.cursor, "nm_ids": nm_ids}
            yield SyncPage.checkpoint(cursor)
        cursor = {**cursor, "listing": False}
        yield SyncPage.checkpoint(cursor)
    nm_ids, done = list(cursor["nm_ids"]), int(cursor["done"])
    start = inp.today - timedelta(days=inp.options.funnel_days - 1)
    async for page in methods.funnel_history(
        inp.client, nm_ids=nm_ids[done:], start=start, end=inp.today
    ):
        rows = [row for item in page.rows for row in funnel_history_rows(item)]
        yield SyncPage("funnel_history", rows, {**cursor, "done": done + int(page.cursor)})


SYNC = Sync(
    name="digitization-sync",
    calls=(eps.CONTENT_CARDS_LIST, eps.ANALYTICS_SALES_FUNNEL_HISTORY),
    long=True,
    interval_s=3600,
    stores=(dataset("funnel_history"),),
    pages=pages,
    cursor=DigitizationCursor,
)
