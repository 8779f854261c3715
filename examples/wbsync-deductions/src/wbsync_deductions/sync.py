"""wb-deductions-sync: WB's report of deductions for substitutions and incorrect attachments.

Declared from WB's documents (Reports, "Substitutions and Incorrect Attachments",
``GET https://seller-analytics-api.wildberries.ru/api/analytics/v1/deductions``, category
Analytics, read-only): ``dateTo`` required, ``dateFrom``, ``sort`` (``dtBonus`` by default),
``order``, ``limit`` (at most 1000) and ``offset``; rows in ``data.reports``. WB's limits per
seller: Personal, Service and Base-with-secret tokens 1 request a minute (burst 1), Base tokens
4 an hour (burst 1).

Each run pulls the lookback window (``WBSYNC_SYNC_LOOKBACK_DAYS``) page by page, oldest first;
the cursor keeps the window and the next offset, so a run deferred on the 1-a-minute bucket
resumes where it stopped.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

from wbsync.extend import (
    Category,
    Count,
    CursorShape,
    Dataset,
    Endpoint,
    KeyField,
    Limit,
    Page,
    Row,
    Section,
    Sync,
    SyncInput,
    SyncPage,
    Text,
    TypeLimits,
    WbClient,
    offset_pages,
    rows_at,
)

PAGE_LIMIT = 1000  # WB's maximum

# The same host as wbsync's analytics methods: declaring it again, identically, is allowed.
ANALYTICS = Section("analytics", "seller-analytics-api")

DEDUCTIONS = Endpoint(
    name="analytics.deductions",
    section=ANALYTICS,
    method="GET",
    path="/api/analytics/v1/deductions",
    group="analytics.deductions",
    category=Category.ANALYTICS,
    limits=TypeLimits.same(
        Limit(period_s=60.0, limit=1, burst=1), base=Limit(period_s=3600.0, limit=4, burst=1)
    ),
)

ROWS = Dataset(
    name="deductions",
    source="GET /api/analytics/v1/deductions",
    key=(
        KeyField("nm_id", "nmId"),
        KeyField("dt_bonus", "dtBonus", "str"),
        KeyField("new_shk_id", "newShkId"),
    ),
    # A run reads a window of the report, not every row the cabinet has: nothing is inferred
    # deleted (a "snapshot" dataset would tombstone the rows a complete run did not see).
    kind="stream",
    # What readers of the feed may rely on in a row's data (GET /api/v1/datasets serves it,
    # with the key fields' types added); rows are not checked against it.
    data_schema={
        "type": "object",
        "properties": {
            "dtBonus": {"type": "string", "format": "date-time"},
            "nmId": {"type": "integer"},
            "oldShkId": {"type": "integer"},
            "newShkId": {"type": "integer"},
            "oldSku": {"type": "string"},
            "newSku": {"type": "string"},
            "bonusSumm": {"type": "integer"},
            "bonusType": {"type": "string"},
        },
    },
)


def deductions(
    client: WbClient, *, date_from: str, date_to: str, offset: int = 0
) -> AsyncIterator[Page]:
    """Deductions between two RFC 3339 moments, oldest first; the cursor is the next offset."""

    async def fetch(limit: int, offset: int) -> list[Row]:
        params = {
            "dateFrom": date_from,
            "dateTo": date_to,
            "sort": "dtBonus",
            "order": "asc",
            "limit": limit,
            "offset": offset,
        }
        reply = await client.call(DEDUCTIONS, params=params)
        return rows_at(reply, DEDUCTIONS, "data", "reports")

    return offset_pages(fetch, limit=PAGE_LIMIT, offset=offset)


class DeductionsCursor(CursorShape):
    """The run's window and the next offset in it; any other cursor is refused."""

    date_from: Text
    date_to: Text
    offset: Count


async def pages(inp: SyncInput) -> AsyncIterator[SyncPage]:
    """The window's deductions, page by page."""
    start = inp.today - timedelta(days=inp.options.lookback_days)
    cursor = inp.cursor or {
        "date_from": f"{start.isoformat()}T00:00:00Z",
        "date_to": f"{inp.today.isoformat()}T23:59:59Z",
        "offset": 0,
    }
    pulled = deductions(
        inp.client,
        date_from=cursor["date_from"],
        date_to=cursor["date_to"],
        offset=cursor["offset"],
    )
    async for page in pulled:
        yield SyncPage("deductions", page.rows, {**cursor, "offset": page.cursor})


SYNC = Sync(
    name="wb-deductions-sync",
    long=True,
    interval_s=6 * 3600.0,
    calls=(DEDUCTIONS,),
    stores=(ROWS,),
    pages=pages,
    cursor=DeductionsCursor,
)
