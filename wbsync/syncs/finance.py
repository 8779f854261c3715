"""rnp-finance-sync: the finance detailed sales report, paged by rrdId (incremental)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

from wbsync.store.datasets import dataset
from wbsync.syncs.base import Count, CursorShape, Sync, SyncInput, SyncPage, optional
from wbsync.wb import endpoints as eps
from wbsync.wb import methods


class FinanceCursor(CursorShape):
    """Where the report goes on: after this rrdId."""

    rrdId: Count = optional()  # WB's name, as the cursor stores it


async def pages(inp: SyncInput) -> AsyncIterator[SyncPage]:
    """Report rows of the lookback window after the cursor's rrdId; WB ends it with a 204."""
    rrd_id = int((inp.cursor or {}).get("rrdId", 0))
    date_from = inp.today - timedelta(days=inp.options.lookback_days)
    async for page in methods.finance_detailed_report(
        inp.client, date_from=date_from, date_to=inp.today, rrd_id=rrd_id
    ):
        yield SyncPage("finance_report", page.rows, {"rrdId": page.cursor})


SYNC = Sync(
    name="rnp-finance-sync",
    calls=(eps.FINANCE_DETAILED_REPORT,),
    long=True,
    interval_s=6 * 3600,
    stores=(dataset("finance_report"),),
    pages=pages,
    cursor=FinanceCursor,
    incremental=True,
)
