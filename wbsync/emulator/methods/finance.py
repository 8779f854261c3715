"""WB's Finance section (finance-api): the detailed sales report."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from wbsync.emulator import reports
from wbsync.emulator.dataset import Row, SellerData
from wbsync.emulator.emulated import Call, EmulatedMethod, ping
from wbsync.emulator.method import HOUR, MINUTE, Method, Rate, rates
from wbsync.emulator.params import day, history_window, integer
from wbsync.emulator.replies import json_reply
from wbsync.emulator.state import SellerState, cached

#: The most rows one page holds (WB's ``limit`` maximum).
PAGE_MAX = 100_000

DETAILED_REPORT = Method(
    "finance.detailed_report",
    "POST",
    "/api/finance/v1/sales-reports/detailed",
    "finance-api",
    "finance",
    rates(Rate(MINUTE, 1, 1), Rate(24 * HOUR, 2, 1)),
    x_category="finance",
)


async def detailed_report(call: Call) -> Response:
    """Finance detail: rows with rrDate in [dateFrom, dateTo] after rrdId; 204 at the end."""
    body = await call.body()
    lo, hi = day(body.get("dateFrom"), "dateFrom"), day(body.get("dateTo"), "dateTo")
    limit = integer(body.get("limit", PAGE_MAX), "limit", lo=1, hi=PAGE_MAX)
    after = integer(body.get("rrdId", 0), "rrdId")
    page = min(limit, call.config.page_for(call.method, PAGE_MAX))
    first, last = lo.isoformat(), hi.isoformat()
    rows = [
        r
        for r in cached(call.data, "finance", reports.finance_rows)
        if first <= r["rrDate"] <= last and r["rrdId"] > after
    ][:page]
    if not rows:
        return Response(status_code=204)
    fields = body.get("fields")
    if isinstance(fields, list) and fields:
        rows = [{k: r[k] for k in fields if k in r} for r in rows]
    return json_reply(rows)


def detailed_report_rows(
    data: SellerData, seller: SellerState, params: dict[str, Any]
) -> list[Row]:
    """Every row with rrDate in [``date_from``, ``date_to``] (default: the history days)."""
    lo, hi = history_window(data, params, "date_from", "date_to")
    first, last = lo.isoformat(), hi.isoformat()
    return [
        r for r in cached(data, "finance", reports.finance_rows) if first <= r["rrDate"] <= last
    ]


EMULATED = (
    EmulatedMethod(DETAILED_REPORT, detailed_report, expected=detailed_report_rows),
    ping("finance-api", "finance", "finance"),
)
