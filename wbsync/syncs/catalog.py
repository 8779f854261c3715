"""catalog-sync: content cards, ascending by (updatedAt, nmID) (incremental)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from wbsync.store.datasets import Dataset, KeyField
from wbsync.syncs.base import CardsPosition, CursorShape, Sync, SyncInput, SyncPage, optional
from wbsync.wb.methods import CONTENT_CARDS_LIST, cards

# catalog-sync is incremental (only cards updated since its cursor): a run is no snapshot.
CARDS = Dataset(
    name="cards", source="POST /content/v2/get/cards/list", key=(KeyField("nm_id", "nmID"),)
)


class CatalogCursor(CursorShape):
    """The position of the last card stored."""

    position: CardsPosition | None = optional()


async def pages(inp: SyncInput) -> AsyncIterator[SyncPage]:
    """Cards updated after the cursor's position; the next run continues from the last one."""
    position = (inp.cursor or {}).get("position")
    async for page in cards(inp.client, cursor=position):
        yield SyncPage("cards", page.rows, {"position": page.cursor})


SYNC = Sync(
    name="catalog-sync",
    calls=(CONTENT_CARDS_LIST,),
    long=True,
    interval_s=3600,
    stores=(CARDS,),
    pages=pages,
    cursor=CatalogCursor,
    incremental=True,
)
