"""rnp-sections-sync: statistics orders, then sales, paged by lastChangeDate (incremental)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import datetime, time, timedelta
from typing import Annotated, Literal

from pydantic import AfterValidator

from wbsync.store.datasets import Dataset, KeyField
from wbsync.syncs.base import CursorShape, Sync, SyncInput, SyncPage, Text, optional
from wbsync.values.scope import Limit
from wbsync.wb.client import WbClient
from wbsync.wb.endpoints import Endpoint, TypeLimits
from wbsync.wb.paging import Page, rows_at
from wbsync.wb.sections import STATISTICS
from wbsync.wb.tokens import Category

STATISTICS_ORDERS = Endpoint(
    name="statistics.orders",
    section=STATISTICS,
    method="GET",
    path="/api/v1/supplier/orders",
    group="statistics.orders",
    category=Category.STATISTICS,
    limits=TypeLimits.same(Limit(60.0, 1, 10), base=Limit(3 * 3600.0, 1, 1)),
)
STATISTICS_SALES = Endpoint(
    name="statistics.sales",
    section=STATISTICS,
    method="GET",
    path="/api/v1/supplier/sales",
    group="statistics.sales",
    category=Category.STATISTICS,
    limits=TypeLimits.same(Limit(60.0, 1, 1), base=Limit(2 * 3600.0, 1, 1)),
)

ORDERS = Dataset(
    name="orders",
    source="GET /api/v1/supplier/orders",
    key=(KeyField("srid", "srid", "str"),),
)
SALES = Dataset(
    name="sales",
    source="GET /api/v1/supplier/sales",
    key=(KeyField("sale_id", "saleID", "str"),),
)


#: How far before the last row's lastChangeDate the next statistics page starts. WB's dateFrom
#: has whole seconds; starting one second early makes both readings WB's documents allow
#: (``>=`` and ``>``) return every row that shares the boundary timestamp, and the rows seen
#: there are dropped by natural key.
STATISTICS_OVERLAP = timedelta(seconds=1)


def _changed_at(text: str) -> datetime:
    return datetime.fromisoformat(text.strip().replace(" ", "T")).replace(tzinfo=None)


async def _statistics(
    client: WbClient, ep: Endpoint, key: str, date_from: str, seen: Sequence[str]
) -> AsyncIterator[Page]:
    """Pages of rows not seen before; the cursor is ``{"from", "seen"}``.

    Ends on an empty reply or on a reply with nothing new, so it never loops on the boundary
    whether WB reads ``dateFrom`` as ``>=`` or ``>``. More than a page of rows within one second
    cannot be paged past (WB's pages hold ~80000 rows).
    """
    known = set(seen)
    while True:
        rows = rows_at(await client.call(ep, params={"dateFrom": date_from}), ep)
        fresh = [r for r in rows if str(r.get(key)) not in known]
        if not fresh:
            return
        start = max(_changed_at(str(r["lastChangeDate"])) for r in rows) - STATISTICS_OVERLAP
        near = {str(r.get(key)) for r in rows if _changed_at(str(r["lastChangeDate"])) >= start}
        # Rows seen at an unchanged boundary may be absent from this reply (the ">" reading).
        known = near | known if start.isoformat() == date_from else near
        date_from = start.isoformat()
        yield Page(fresh, {"from": date_from, "seen": sorted(known)})


def orders(client: WbClient, *, date_from: str, seen: Sequence[str] = ()) -> AsyncIterator[Page]:
    """Statistics orders changed since ``date_from`` not in ``seen`` (srid); the cursor is
    ``{"from": next dateFrom, "seen": srids already pulled at that boundary}``."""
    return _statistics(client, STATISTICS_ORDERS, "srid", date_from, seen)


def sales(client: WbClient, *, date_from: str, seen: Sequence[str] = ()) -> AsyncIterator[Page]:
    """Statistics sales and returns changed since ``date_from`` not in ``seen`` (saleID); the
    cursor as for orders."""
    return _statistics(client, STATISTICS_SALES, "saleID", date_from, seen)


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
        pulled = orders(
            inp.client, date_from=cursor["orders_from"], seen=cursor.get("orders_seen", ())
        )
        async for page in pulled:
            cursor = {
                **cursor,
                "orders_from": page.cursor["from"],
                "orders_seen": page.cursor["seen"],
            }
            yield SyncPage("orders", page.rows, cursor)
        cursor = {**cursor, "phase": "sales"}
        yield SyncPage.checkpoint(cursor)
    pulled = sales(inp.client, date_from=cursor["sales_from"], seen=cursor.get("sales_seen", ()))
    async for page in pulled:
        cursor = {**cursor, "sales_from": page.cursor["from"], "sales_seen": page.cursor["seen"]}
        yield SyncPage("sales", page.rows, cursor)
    yield SyncPage.checkpoint({**cursor, "phase": "orders"})


SYNC = Sync(
    name="rnp-sections-sync",
    calls=(STATISTICS_ORDERS, STATISTICS_SALES),
    long=True,
    interval_s=30 * 60,
    stores=(ORDERS, SALES),
    pages=pages,
    cursor=SectionsCursor,
    incremental=True,
)
