"""rnp-finance-sync: the finance detailed sales report, paged by rrdId (incremental)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import date, timedelta

from wbsync.store.datasets import Dataset, KeyField
from wbsync.syncs.base import Count, CursorShape, Sync, SyncInput, SyncPage, optional
from wbsync.values.scope import Limit
from wbsync.wb.client import WbClient
from wbsync.wb.endpoints import Endpoint, TypeLimits
from wbsync.wb.paging import Page, Row, key_pages, rows_at
from wbsync.wb.sections import FINANCE
from wbsync.wb.tokens import Category

FINANCE_DETAILED_REPORT = Endpoint(
    name="finance.detailed_report",
    section=FINANCE,
    method="POST",
    path="/api/finance/v1/sales-reports/detailed",
    group="finance.detailed_report",
    category=Category.FINANCE,
    limits=TypeLimits.same(Limit(60.0, 1, 1), base=Limit(24 * 3600.0, 2, 1)),
)

FINANCE_REPORT = Dataset(
    name="finance_report",
    source="POST /api/finance/v1/sales-reports/detailed",
    key=(KeyField("rrd_id", "rrdId"),),
)


async def finance_detailed_report(
    client: WbClient,
    *,
    date_from: date,
    date_to: date,
    rrd_id: int = 0,
    limit: int | None = None,
    period: str = "weekly",
) -> AsyncIterator[Page]:
    """Finance detail rows after ``rrd_id``; the cursor is the last row's rrdId; ends on 204.

    ``limit`` rows a page, by default ``wb_finance_page_rows``: WB allows 100,000 (~200 MB of
    JSON), which no worker should parse at once.
    """
    ep = FINANCE_DETAILED_REPORT
    limit = limit or client.options.finance_page_rows

    async def fetch(after: int) -> list[Row]:
        body = {
            "dateFrom": date_from.isoformat(),
            "dateTo": date_to.isoformat(),
            "limit": limit,
            "rrdId": after,
            "period": period,
        }
        return rows_at(await client.call(ep, json=body), ep)

    async for page in key_pages(fetch, after=rrd_id, key=lambda row: int(row["rrdId"])):
        yield page


class FinanceCursor(CursorShape):
    """Where the report goes on: after this rrdId."""

    rrdId: Count = optional()  # WB's name, as the cursor stores it


async def pages(inp: SyncInput) -> AsyncIterator[SyncPage]:
    """Report rows of the lookback window after the cursor's rrdId; WB ends it with a 204."""
    rrd_id = int((inp.cursor or {}).get("rrdId", 0))
    date_from = inp.today - timedelta(days=inp.options.lookback_days)
    async for page in finance_detailed_report(
        inp.client, date_from=date_from, date_to=inp.today, rrd_id=rrd_id
    ):
        yield SyncPage("finance_report", page.rows, {"rrdId": page.cursor})


SYNC = Sync(
    name="rnp-finance-sync",
    calls=(FINANCE_DETAILED_REPORT,),
    long=True,
    interval_s=6 * 3600,
    stores=(FINANCE_REPORT,),
    pages=pages,
    cursor=FinanceCursor,
    incremental=True,
)
