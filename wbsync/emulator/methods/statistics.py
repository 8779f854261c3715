"""WB's Statistics section (statistics-api): the orders and sales reports.

Both page by ``lastChangeDate``: ``dateFrom`` is read as ``>=`` (WB's documents) or ``>``
(``EmulatorConfig.statistics_date_from``), and ``flag=1`` returns one day's rows whole.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from starlette.responses import Response

from wbsync.emulator import reports
from wbsync.emulator.config import MOSCOW
from wbsync.emulator.dataset import Row, SellerData
from wbsync.emulator.emulated import Call, EmulatedMethod, Expectation, Handler, ping
from wbsync.emulator.method import HOUR, MINUTE, Method, Rate, rates
from wbsync.emulator.replies import BadRequest, json_reply
from wbsync.emulator.state import SellerState, cached

#: The most rows one reply holds.
PAGE_MAX = 80_000

ORDERS = Method(
    "statistics.orders",
    "GET",
    "/api/v1/supplier/orders",
    "statistics-api",
    "statistics",
    rates(Rate(MINUTE, 1, 10), Rate(3 * HOUR, 1, 1)),
    x_category="statistics",
)
SALES = Method(
    "statistics.sales",
    "GET",
    "/api/v1/supplier/sales",
    "statistics-api",
    "statistics",
    rates(Rate(MINUTE, 1, 1), Rate(2 * HOUR, 1, 1)),
    x_category="statistics",
)


def parse_moscow(text: str) -> datetime:
    """A statistics ``dateFrom``: a date or an RFC 3339 date-time, as Moscow wall time (WB's
    rows' ``lastChangeDate`` are); a time with an offset is moved to Moscow's first."""
    moment = datetime.fromisoformat(text.strip().replace(" ", "T"))
    return moment.astimezone(MOSCOW).replace(tzinfo=None) if moment.tzinfo else moment


def rows_after(rows: list[Row], since: datetime, *, inclusive: bool) -> list[Row]:
    """Rows whose ``lastChangeDate`` is at or after (``inclusive``, WB's documented reading) or
    strictly after ``since`` (the paging cursor)."""
    if inclusive:
        return [r for r in rows if datetime.fromisoformat(r["lastChangeDate"]) >= since]
    return [r for r in rows if datetime.fromisoformat(r["lastChangeDate"]) > since]


def _handler(method: str, build: Callable[[SellerData], list[Row]]) -> Handler:
    async def handler(call: Call) -> Response:
        raw = call.query("dateFrom")
        if not raw:
            raise BadRequest("dateFrom is required")
        try:
            since = parse_moscow(raw)
        except ValueError:
            raise BadRequest("dateFrom: invalid date") from None
        rows = cached(call.data, method, build)
        if call.query("flag") == "1":
            day = since.date().isoformat()
            return json_reply([r for r in rows if r["date"][:10] == day])
        page = call.config.page_for(call.method, PAGE_MAX)
        return json_reply(rows_after(rows, since, inclusive=call.data.date_from_inclusive)[:page])

    return handler


def _expected(method: str, build: Callable[[SellerData], list[Row]]) -> Expectation:
    def expected(data: SellerData, seller: SellerState, params: dict[str, Any]) -> list[Row]:
        """Every row changed from ``date_from`` (default: every row), as WB reads it."""
        since = parse_moscow(str(params.get("date_from", "2000-01-01")))
        return rows_after(cached(data, method, build), since, inclusive=data.date_from_inclusive)

    return expected


def _emulated(method: Method, build: Callable[[SellerData], list[Row]]) -> EmulatedMethod:
    return EmulatedMethod(
        method, _handler(method.name, build), expected=_expected(method.name, build)
    )


EMULATED = (
    _emulated(ORDERS, reports.orders),
    _emulated(SALES, reports.sales),
    ping("statistics-api", "statistics", "statistics"),
)
