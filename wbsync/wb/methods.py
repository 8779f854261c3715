"""Typed helpers over ``WbClient.call``: one per WB method, with WB's paging.

Pagers are async iterators of ``Page``: the rows of one reply and the cursor that resumes right
after them, so a sync can store rows and cursor page by page and pick up after a deferral.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import date, datetime, timedelta
from typing import Any

from wbsync.wb import endpoints as eps
from wbsync.wb.client import WbClient
from wbsync.wb.paging import (
    Page,
    Row,
    bad_reply,
    batch_pages,
    batches,
    key_pages,
    offset_pages,
    rows_at,
)

__all__ = [
    "FULLSTATS_STATUSES",
    "NOT_IN_REPLY",
    "BidKey",
    "Page",
    "acceptance_coefficients",
    "adverts",
    "cards",
    "finance_detailed_report",
    "fullstats",
    "funnel_history",
    "get_bids",
    "goods",
    "orders",
    "sales",
    "set_bids",
    "set_bids_v1",
    "stocks",
    "upload_prices",
]


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
    ep = eps.FINANCE_DETAILED_REPORT
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


#: How far before the last row's lastChangeDate the next statistics page starts. WB's dateFrom
#: has whole seconds; starting one second early makes both readings WB's documents allow
#: (``>=`` and ``>``) return every row that shares the boundary timestamp, and the rows seen
#: there are dropped by natural key.
STATISTICS_OVERLAP = timedelta(seconds=1)


def _moment(text: str) -> datetime:
    return datetime.fromisoformat(text.strip().replace(" ", "T")).replace(tzinfo=None)


async def _statistics(
    client: WbClient, ep: eps.Endpoint, key: str, date_from: str, seen: Sequence[str]
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
        start = max(_moment(str(r["lastChangeDate"])) for r in rows) - STATISTICS_OVERLAP
        near = {str(r.get(key)) for r in rows if _moment(str(r["lastChangeDate"])) >= start}
        # Rows seen at an unchanged boundary may be absent from this reply (the ">" reading).
        known = near | known if start.isoformat() == date_from else near
        date_from = start.isoformat()
        yield Page(fresh, {"from": date_from, "seen": sorted(known)})


def orders(client: WbClient, *, date_from: str, seen: Sequence[str] = ()) -> AsyncIterator[Page]:
    """Statistics orders changed since ``date_from`` not in ``seen`` (srid); the cursor is
    ``{"from": next dateFrom, "seen": srids already pulled at that boundary}``."""
    return _statistics(client, eps.STATISTICS_ORDERS, "srid", date_from, seen)


def sales(client: WbClient, *, date_from: str, seen: Sequence[str] = ()) -> AsyncIterator[Page]:
    """Statistics sales and returns changed since ``date_from`` not in ``seen`` (saleID); the
    cursor as for orders."""
    return _statistics(client, eps.STATISTICS_SALES, "saleID", date_from, seen)


async def adverts(
    client: WbClient,
    *,
    ids: Sequence[int] = (),
    statuses: Sequence[int] = (),
    payment_type: str | None = None,
) -> list[Row]:
    """Campaigns (one call; ``ids`` in batches of 50)."""
    ep = eps.PROMOTION_ADVERTS
    params: dict[str, Any] = {}
    if statuses:
        params["statuses"] = ",".join(map(str, statuses))
    if payment_type:
        params["payment_type"] = payment_type
    if not ids:
        return rows_at(await client.call(ep, params=params or None), ep, "adverts")
    out: list[Row] = []
    for batch in batches(list(ids), 50):
        reply = await client.call(ep, params=params | {"ids": ",".join(map(str, batch))})
        out += rows_at(reply, ep, "adverts")
    return out


#: The campaign statuses WB documents full stats for: 7 finished, 9 active, 11 paused.
FULLSTATS_STATUSES = frozenset({7, 9, 11})


def fullstats(
    client: WbClient, *, ids: Sequence[int], begin: date, end: date
) -> AsyncIterator[Page]:
    """Full stats of ``ids`` (campaigns in ``FULLSTATS_STATUSES``) over [begin, end] (WB's days,
    at most 31), in batches of 50; the cursor is how many ids are done. A batch none of whose
    ids has statistics in the window is an empty page (``eps.FULLSTATS_NO_COMPANIES``)."""
    ep = eps.PROMOTION_FULLSTATS

    async def fetch(batch: Sequence[int]) -> list[Row]:
        params = {
            "ids": ",".join(map(str, batch)),
            "beginDate": begin.isoformat(),
            "endDate": end.isoformat(),
        }
        return rows_at(await client.call(ep, params=params), ep)

    return batch_pages(list(ids), 50, fetch)


def get_bids(client: WbClient, items: Sequence[tuple[int, int]]) -> AsyncIterator[Page]:
    """Search-cluster bids of (advert_id, nm_id) pairs, 100 per call; cursor = pairs done."""
    ep = eps.PROMOTION_GET_BIDS

    async def fetch(batch: Sequence[tuple[int, int]]) -> list[Row]:
        body = {"items": [{"advert_id": a, "nm_id": n} for a, n in batch]}
        return rows_at(await client.call(ep, json=body), ep, "bids")

    return batch_pages(list(items), 100, fetch)


async def set_bids(client: WbClient, bids: Sequence[Row]) -> None:
    """Set search-cluster bids (``advert_id``, ``nm_id``, ``norm_query``, ``bid``), 100 a call.

    Returns only when WB applied every batch: its documented answer is a 2xx with no body; a
    body that is an error object (or anything else) is an unusable reply, never a success.
    """
    ep = eps.PROMOTION_SET_BIDS
    for batch in batches(list(bids), 100):
        reply = await client.call(ep, json={"bids": list(batch)})
        if reply.data is not None and reply.data != {}:
            raise bad_reply(reply, ep, "expected no body from a bid update")


BidKey = tuple[int, int, str]
"""A bid's (campaign, item, search cluster)."""

#: What an item of a v1 bids call WB's reply names neither applied nor refused is noted with.
NOT_IN_REPLY = "WB's reply listed this bid neither as set nor as failed"


async def set_bids_v1(client: WbClient, bids: Sequence[Row]) -> dict[BidKey, str | None]:
    """Set search-cluster bids through WB's v1 method (``advertId``, ``nmId``, ``normQuery``,
    ``bidMinorUnits``: kopecks), 100 a call; each bid's outcome: None when WB set it, else
    WB's reason (``NOT_IN_REPLY`` for a bid its reply does not mention).

    WB answers each item in ``success`` or ``failed``: a call WB answers 200 may have set some
    bids and refused others. A reply without both lists is unusable.
    """
    ep = eps.PROMOTION_SET_BIDS_V1
    out: dict[BidKey, str | None] = {}
    for batch in batches(list(bids), 100):
        reply = await client.call(ep, json={"bids": list(batch)})
        data = reply.data
        if not isinstance(data, dict) or not all(
            isinstance(data.get(k), list) for k in ("success", "failed")
        ):
            raise bad_reply(reply, ep, "expected the lists success and failed")
        said = _bid_outcomes(data["success"], data["failed"])
        for bid in batch:
            key = (int(bid["advertId"]), int(bid["nmId"]), str(bid["normQuery"]))
            out[key] = said.get(key, NOT_IN_REPLY)
    return out


def _bid_outcomes(success: list[Any], failed: list[Any]) -> dict[BidKey, str | None]:
    """The items of a v1 reply by key; a failure wins over a success of the same key."""
    out: dict[BidKey, str | None] = {}
    for item, reason in [(i, None) for i in success] + [(i, _reason(i)) for i in failed]:
        key = _bid_key(item)
        if key is not None:
            out[key] = reason
    return out


def _bid_key(item: Any) -> BidKey | None:
    if not isinstance(item, Mapping):
        return None
    try:
        return (int(item["advertId"]), int(item["nmId"]), str(item["normQuery"]))
    except (KeyError, TypeError, ValueError):
        return None  # an item we cannot place: its bid stays NOT_IN_REPLY


def _reason(item: Any) -> str:
    reason = item.get("reason") if isinstance(item, Mapping) else None
    return str(reason) if reason else "WB gave no reason"


def funnel_history(
    client: WbClient, *, nm_ids: Sequence[int], start: date, end: date, aggregation: str = "day"
) -> AsyncIterator[Page]:
    """Sales-funnel history of ``nm_ids``, 20 per call; the cursor is how many ids are done."""
    ep = eps.ANALYTICS_SALES_FUNNEL_HISTORY

    async def fetch(batch: Sequence[int]) -> list[Row]:
        body = {
            "nmIds": list(batch),
            "aggregationLevel": aggregation,
            "selectedPeriod": {"start": start.isoformat(), "end": end.isoformat()},
        }
        return rows_at(await client.call(ep, json=body), ep)

    return batch_pages(list(nm_ids), 20, fetch)


def stocks(
    client: WbClient, *, limit: int = 250_000, offset: int = 0, nm_ids: Sequence[int] = ()
) -> AsyncIterator[Page]:
    """Stocks by WB warehouses, offset paging; the cursor is the next offset."""
    ep = eps.ANALYTICS_STOCKS_WB_WAREHOUSES

    async def fetch(limit: int, offset: int) -> list[Row]:
        body: Row = {"limit": limit, "offset": offset}
        if nm_ids:
            body["nmIds"] = list(nm_ids)
        return rows_at(await client.call(ep, json=body), ep, "data", "items")

    return offset_pages(fetch, limit=limit, offset=offset)


async def cards(
    client: WbClient, *, limit: int = 100, cursor: Row | None = None
) -> AsyncIterator[Page]:
    """Content cards, ascending; the cursor is ``{"updatedAt", "nmID"}`` of the last card."""
    ep = eps.CONTENT_CARDS_LIST
    position = dict(cursor or {})
    while True:
        body = {
            "settings": {
                "sort": {"ascending": True},
                "filter": {"withPhoto": -1},
                "cursor": {"limit": limit, **position},
            }
        }
        reply = await client.call(ep, json=body)
        rows = rows_at(reply, ep, "cards")
        got = reply.data.get("cursor") or {}
        if rows:
            position = {"updatedAt": got.get("updatedAt"), "nmID": got.get("nmID")}
            yield Page(rows, dict(position))
        if int(got.get("total", len(rows))) < limit:
            return


def goods(client: WbClient, *, limit: int = 1000, offset: int = 0) -> AsyncIterator[Page]:
    """Goods with prices, limit + offset until an empty list; the cursor is the next offset."""
    ep = eps.PRICES_GOODS_LIST

    async def fetch(limit: int, offset: int) -> list[Row]:
        reply = await client.call(ep, params={"limit": limit, "offset": offset})
        return rows_at(reply, ep, "data", "listGoods")

    return offset_pages(fetch, limit=limit, offset=offset, stop_short=False)


async def upload_prices(client: WbClient, items: Sequence[Row]) -> int:
    """Upload prices/discounts (``nmID``, ``price``, ``discount``; up to 1000); the task id."""
    ep = eps.PRICES_UPLOAD_TASK
    reply = await client.call(ep, json={"data": list(items)})
    data = reply.data.get("data") if isinstance(reply.data, dict) else None
    if not isinstance(data, dict) or not isinstance(data.get("id"), int):
        raise bad_reply(reply, ep, "upload reply has no task id")
    task_id: int = data["id"]
    return task_id


async def acceptance_coefficients(
    client: WbClient, *, warehouse_ids: Sequence[int] = ()
) -> list[Row]:
    """Acceptance coefficients (``coefficient`` -1 closed, 0 free, >0 paid)."""
    ep = eps.TARIFFS_ACCEPTANCE_COEFFICIENTS
    params = {"warehouseIDs": ",".join(map(str, warehouse_ids))} if warehouse_ids else None
    return rows_at(await client.call(ep, params=params), ep)
