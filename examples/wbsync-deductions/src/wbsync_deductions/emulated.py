"""The deductions method in wbsync's emulator, written from WB's documents (not from the sync).

Each seller gets between 2,000 and 2,499 deductions (three pages of WB's 1,000), dated within the
20 days before the emulator's anchor date, generated from the emulator's seed.
"""

from __future__ import annotations

from datetime import datetime, time, timedelta
from typing import Any

from starlette.responses import Response

from wbsync.emulator.extend import (
    BadRequest,
    Call,
    EmulatedMethod,
    Kind,
    Method,
    Rate,
    Row,
    SellerData,
    SellerState,
    cached,
    json_reply,
)

MAX_LIMIT = 1000
_MINUTE = Rate(60.0, 1, 1)

METHOD = Method(
    name="analytics.deductions",
    verb="GET",
    path="/api/analytics/v1/deductions",
    host="seller-analytics-api",
    category="analytics",
    rates={
        Kind.PERSONAL: _MINUTE,
        Kind.SERVICE: _MINUTE,
        Kind.TEST: _MINUTE,
        Kind.BASE: Rate(3600.0, 4, 1),
    },
    group="analytics.deductions",
    x_category="contentanalytics",
)

_SORTS = {"nmId", "dtBonus", "bonusSumm"}
_KINDS = ("Подмена товара", "Неверное вложение")


def deduction_rows(data: SellerData) -> list[Row]:
    """Every deduction of the seller, in no particular order."""
    r = data.rng("deductions")
    anchor = datetime.combine(data.anchor, time())
    products = data.products
    rows = []
    for i in range(2000 + r.randrange(500)):
        product = products[r.randrange(len(products))]
        moment = anchor - timedelta(days=r.randrange(20), seconds=r.randrange(86_400))
        rows.append(
            {
                "dtBonus": moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "nmId": product.nm_id,
                "oldShkId": 30_000_000_000 + i,
                "newShkId": 40_000_000_000 + i,
                "oldSku": f"{product.nm_id}-{r.randrange(100)}",
                "newSku": f"{product.nm_id}-{r.randrange(100)}",
                "bonusSumm": r.randrange(100, 5000),
                "bonusType": _KINDS[r.randrange(len(_KINDS))],
            }
        )
    return rows


def _int(call: Call, name: str, *, default: int | None, most: int | None = None) -> int:
    text = call.query(name)
    if text is None:
        if default is None:
            raise BadRequest(f"invalid parameter: {name}")
        return default
    try:
        value = int(text)
    except ValueError:
        raise BadRequest(f"invalid parameter: {name}") from None
    if value < 0 or (most is not None and value > most):
        raise BadRequest(f"invalid parameter: {name}")
    return value


def _moment(call: Call, name: str, default: str | None) -> str:
    text = call.query(name) or default
    if text is None:
        raise BadRequest(f"invalid parameter: {name}")
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise BadRequest(f"invalid parameter: {name}") from None
    return text.replace("+00:00", "Z")


async def handle(call: Call) -> Response:
    """A page of the seller's deductions between dateFrom and dateTo, sorted and offset."""
    limit = _int(call, "limit", default=None, most=MAX_LIMIT)
    offset = _int(call, "offset", default=0)
    date_to = _moment(call, "dateTo", None)
    date_from = _moment(call, "dateFrom", "1970-01-01T00:00:00Z")
    sort = call.query("sort") or "dtBonus"
    order = call.query("order") or "desc"
    if sort not in _SORTS or order not in ("asc", "desc"):
        raise BadRequest(
            "invalid parameter: sort" if sort not in _SORTS else "invalid parameter: order"
        )
    rows = cached(call.data, "deductions", deduction_rows)
    # Same-second rows keep one order page after page (WB's offset paging needs it).
    found = sorted(
        (row for row in rows if date_from <= row["dtBonus"] <= date_to),
        key=lambda row: (row[sort], row["nmId"], row["newShkId"]),
        reverse=order == "desc",
    )
    page = found[offset : offset + limit] if limit else []
    return json_reply({"data": {"reports": page, "total": len(found)}})


def expected(data: SellerData, seller: SellerState, params: dict[str, Any]) -> list[Row]:
    """What a full pull returns (``/__emulator/expected``): the deductions between the
    ``date_from`` and ``date_to`` query parameters (RFC 3339; default: all), oldest first."""
    date_from = params.get("date_from", "1970-01-01T00:00:00Z")
    date_to = params.get("date_to", "9999-12-31T23:59:59Z")
    rows = cached(data, "deductions", deduction_rows)
    found = (row for row in rows if date_from <= row["dtBonus"] <= date_to)
    return sorted(found, key=lambda row: (row["dtBonus"], row["nmId"], row["newShkId"]))


EMULATED = EmulatedMethod(METHOD, handle, expected=expected)
