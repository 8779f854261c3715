"""rnp-ads-sync: the advert list, then full stats of the campaigns in batches of 50 ids."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

from wbsync.store.datasets import advert_stats_rows, dataset
from wbsync.syncs.base import Count, CursorShape, Sync, SyncInput, SyncPage
from wbsync.wb import endpoints as eps
from wbsync.wb import methods


class AdsCursor(CursorShape):
    """The campaigns listed, and how many of them have their stats stored."""

    ids: list[Count]
    done: Count


async def pages(inp: SyncInput) -> AsyncIterator[SyncPage]:
    """Campaigns (one page), then each batch's daily stats over the stats window."""
    cursor = inp.cursor or {}
    if "ids" not in cursor:
        campaigns = await methods.adverts(inp.client)
        cursor = {"ids": [c["id"] for c in campaigns], "done": 0}
        yield SyncPage("adverts", campaigns, cursor)
    ids, done = list(cursor["ids"]), int(cursor["done"])
    begin = inp.today - timedelta(days=inp.options.stats_days - 1)
    async for page in methods.fullstats(inp.client, ids=ids[done:], begin=begin, end=inp.today):
        rows = [row for item in page.rows for row in advert_stats_rows(item)]
        yield SyncPage("advert_stats", rows, {"ids": ids, "done": done + int(page.cursor)})


SYNC = Sync(
    name="rnp-ads-sync",
    calls=(eps.PROMOTION_ADVERTS, eps.PROMOTION_FULLSTATS),
    long=True,
    interval_s=3600,
    stores=(dataset("adverts"), dataset("advert_stats")),
    pages=pages,
    cursor=AdsCursor,
)
