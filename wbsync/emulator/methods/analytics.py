"""WB's Analytics section (seller-analytics-api): the sales funnel and the stocks report."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from starlette.responses import Response

from wbsync.emulator import report_tasks
from wbsync.emulator.dataset import Row, SellerData
from wbsync.emulator.emulated import Call, EmulatedMethod, ping
from wbsync.emulator.method import HOUR, MINUTE, Method, Rate, rates
from wbsync.emulator.params import day, history_window, integer
from wbsync.emulator.replies import BadRequest, json_reply
from wbsync.emulator.state import SellerState, cached

#: WB serves the sales-funnel history of "a maximum of the last week": today and the 6 days
#: before it, today being Moscow's date (``EmulatorConfig.today``).
FUNNEL_DAYS = 7
#: The most items one funnel request names, and the most rows one stocks page holds.
FUNNEL_ITEMS_MAX, STOCKS_PAGE_MAX = 20, 250_000

FUNNEL_HISTORY = Method(
    "analytics.sales_funnel_history",
    "POST",
    "/api/analytics/v3/sales-funnel/products/history",
    "seller-analytics-api",
    "analytics",
    rates(Rate(MINUTE, 3, 3), Rate(HOUR, 2, 1)),
    x_category="contentanalytics",
)
# Key icon: Personal, Service, Base with secret. No Base row, so Base may not call it.
STOCKS = Method(
    "analytics.stocks_wb_warehouses",
    "POST",
    "/api/analytics/v1/stocks-report/wb-warehouses",
    "seller-analytics-api",
    "analytics",
    rates(Rate(MINUTE, 3, 1), None),
    x_category="contentanalytics",
)


def _funnel_period(call: Call, period: dict[str, Any]) -> tuple[date, date]:
    begin, end = day(period.get("start"), "start"), day(period.get("end"), "end")
    oldest = call.config.today() - timedelta(days=FUNNEL_DAYS - 1)
    if begin < oldest:
        raise BadRequest(
            f"invalid start day: {begin.isoformat()} is before {oldest.isoformat()}, the "
            "first day of the last week (Moscow time)",
            "Invalid request body",
        )
    if end < begin:
        raise BadRequest("invalid end day: before the start day", "Invalid request body")
    return begin, end


async def funnel_history(call: Call) -> Response:
    """Sales-funnel history of up to 20 items, by day or week, within the last week."""
    body = await call.body()
    nm_ids = body.get("nmIds")
    if not isinstance(nm_ids, list) or not 1 <= len(nm_ids) <= FUNNEL_ITEMS_MAX:
        raise BadRequest(f"nmIds: 1 to {FUNNEL_ITEMS_MAX} items required")
    begin, end = _funnel_period(call, body.get("selectedPeriod") or {})
    week = body.get("aggregationLevel", "day") == "week"
    rows = []
    for nm in nm_ids:
        product = call.data.product(integer(nm, "nmIds"))
        if product is not None:
            rows.append(call.data.funnel_item(product, begin, end, week))
    return json_reply(rows)


def funnel_history_rows(data: SellerData, seller: SellerState, params: dict[str, Any]) -> list[Row]:
    """Every item's history over [``begin``, ``end``] (default: the history days), by day or
    by week (``aggregation=week``)."""
    begin, end = history_window(data, params, "begin", "end")
    week = params.get("aggregation") == "week"
    return [data.funnel_item(p, begin, end, week) for p in data.products]


async def stocks(call: Call) -> Response:
    """Stocks by WB warehouses: offset paging."""
    body = await call.body()
    nm_ids = set(body.get("nmIds") or [])
    if len(nm_ids) > 1000:
        raise BadRequest("nmIds: at most 1000")
    chrt_ids = set(body.get("chrtIds") or [])
    limit = integer(body.get("limit", STOCKS_PAGE_MAX), "limit", lo=1, hi=STOCKS_PAGE_MAX)
    offset = integer(body.get("offset", 0), "offset")
    rows = [
        r
        for r in cached(call.data, "stocks", SellerData.stocks)
        if (not nm_ids or r["nmId"] in nm_ids)
        and (not chrt_ids or not nm_ids or r["chrtId"] in chrt_ids)
    ]
    page = min(limit, call.config.page_for(call.method, STOCKS_PAGE_MAX))
    return json_reply({"data": {"items": rows[offset : offset + page]}})


def stocks_rows(data: SellerData, seller: SellerState, params: dict[str, Any]) -> list[Row]:
    """The whole stocks report."""
    return cached(data, "stocks", SellerData.stocks)


EMULATED = (
    EmulatedMethod(FUNNEL_HISTORY, funnel_history, expected=funnel_history_rows),
    EmulatedMethod(STOCKS, stocks, expected=stocks_rows),
    # WB's report tasks (paid storage, warehouse remains, paid acceptance): a module of their own.
    *report_tasks.EMULATED,
    ping("seller-analytics-api", "analytics", "analytics"),
)
