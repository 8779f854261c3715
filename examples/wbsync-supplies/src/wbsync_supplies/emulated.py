"""WB's supplies list in wbsync's emulator, written from WB's document of the method.

``POST /api/v1/supplies`` on ``supplies-api`` (orders-fbw, "Supplies List"): ``limit`` (1 to
1000, default 1000) and ``offset`` (default 0) in the query; a JSON body of filters,
``statusIDs`` (1 to 6) and ``dates`` (``type`` one of WB's four date fields, ``from`` and
``till`` ISO 8601); a bare array of ``models.Supply`` in reply, newest first (WB: "the last
1000 supplies by default"). A bad parameter is a 400. Limits, per seller: Personal and Service
tokens 30 a minute, burst 10; Base tokens 2 an hour, burst 1; WB runs no sandbox of the host.

The emulator's readings where WB's document says nothing: rows are ordered by ``createDate``,
newest first; a date filter keeps a row whose date of that type is in [``from``, ``till``]
(a row without that date is left out; a date with no time is Moscow's midnight for ``from``
and the whole day for ``till``), and several date filters must all hold.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta, timezone
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

METHOD = Method(
    name="supplies.list",
    verb="POST",
    path="/api/v1/supplies",
    host="supplies-api",
    category="supplies",
    rates={
        Kind.PERSONAL: Rate(60.0, 30, 10),
        Kind.SERVICE: Rate(60.0, 30, 10),
        Kind.BASE: Rate(3600.0, 2, 1),
    },
    group="supplies.list",
    x_category="supplies",
)

# WB's connection check of the host (api-information, "Connection Check").
PING = Method(
    name="supplies.ping",
    verb="GET",
    path="/ping",
    host="supplies-api",
    category="supplies",
    rates={kind: Rate(30.0, 3, 3) for kind in (Kind.PERSONAL, Kind.SERVICE, Kind.BASE)},
    group="supplies.ping",
    x_category="all",
)

MAX_LIMIT = 1000
STATUSES = (1, 2, 3, 4, 5, 6)
DATE_TYPES = ("factDate", "createDate", "supplyDate", "updatedDate")
MOSCOW = timezone(timedelta(hours=3))
# How many supplies a seller has, per listing it sells.
SUPPLIES_PER_PRODUCT = 2


def _moment(day: date, rng_seconds: int) -> datetime:
    return datetime.combine(day, time(), MOSCOW) + timedelta(seconds=rng_seconds)


def _wb_time(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat(timespec="seconds")


def supply_rows(data: SellerData) -> list[Row]:
    """The seller's supplies as WB lists them, newest first (the emulator's order)."""
    rng = data.rng("supplies")
    count = SUPPLIES_PER_PRODUCT * len(data.products)
    rows: list[tuple[datetime, Row]] = []
    for index in range(count):
        created = _moment(data.anchor - timedelta(days=rng.randint(0, 120)), rng.randint(0, 86399))
        age_days = (data.anchor - created.date()).days
        # Older supplies are accepted; recent ones are anywhere on the way.
        status = 5 if age_days > 21 else rng.choice(STATUSES)
        box_type = rng.choice((0, 1, 2, 5, 6))
        virtual = box_type == 0
        preorder_id = 0 if virtual else 30_000_000 + index * 7 + rng.randint(0, 6)
        # An unplanned supply is still an order: no supply id, its order's id instead.
        supply_id = None if status == 1 and not virtual else 20_000_000 + index * 11
        planned = None if status == 1 else created + timedelta(days=rng.randint(1, 10))
        dispatched = planned if status >= 4 and planned is not None else None
        updated = None if status == 1 else (dispatched or planned or created) + timedelta(hours=5)
        row: Row = {
            "phone": f"+7 9{rng.randint(10, 99)} *** {rng.randint(10, 99)} {rng.randint(10, 99)}",
            "supplyID": supply_id,
            "preorderID": preorder_id,
            "createDate": _wb_time(created),
            "supplyDate": _wb_time(planned),
            "factDate": _wb_time(dispatched),
            "updatedDate": _wb_time(updated),
            "statusID": status,
            "boxTypeID": box_type,
        }
        if box_type == 2:  # WB returns the field only for boxTypeID 2
            row["isBoxOnPallet"] = rng.random() < 0.5
        rows.append((created, row))
    rows.sort(key=lambda pair: (pair[0], pair[1]["preorderID"], pair[1]["supplyID"] or 0))
    return [row for _, row in reversed(rows)]


def _count(call: Call, name: str, default: int, low: int, high: int | None) -> int:
    raw = call.query(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = low - 1
    if value < low or (high is not None and value > high):
        bound = f"from {low} to {high}" if high is not None else f"of at least {low}"
        raise BadRequest(f"{name} must be an integer {bound}, got {raw!r}")
    return value


def _when(raw: Any, field: str, end: bool) -> datetime:
    if not isinstance(raw, str):
        raise BadRequest(f"dates.{field} must be an ISO 8601 date or time, got {raw!r}")
    try:
        if len(raw) == 10:
            day = date.fromisoformat(raw)
            return datetime.combine(day + timedelta(days=1) if end else day, time(), MOSCOW)
        moment = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise BadRequest(f"dates.{field} must be an ISO 8601 date or time, got {raw!r}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=MOSCOW)


def _date_filter(raw: Any) -> tuple[str, datetime | None, datetime | None]:
    if not isinstance(raw, dict) or raw.get("type") not in DATE_TYPES:
        raise BadRequest(f"dates[].type must be one of {', '.join(DATE_TYPES)}")
    start = _when(raw["from"], "from", end=False) if "from" in raw else None
    stop = _when(raw["till"], "till", end=True) if "till" in raw else None
    return raw["type"], start, stop


def _kept(row: Row, filters: list[tuple[str, datetime | None, datetime | None]]) -> bool:
    for field, start, stop in filters:
        if row[field] is None:
            return False
        moment = datetime.fromisoformat(row[field])
        if (start is not None and moment < start) or (stop is not None and moment >= stop):
            return False
    return True


async def handle(call: Call) -> Response:
    """One page of the list, filtered as the body asks."""
    limit = _count(call, "limit", MAX_LIMIT, 1, MAX_LIMIT)
    offset = _count(call, "offset", 0, 0, None)
    body = await call.body()
    statuses = body.get("statusIDs") or []
    if not isinstance(statuses, list) or any(s not in STATUSES or s is True for s in statuses):
        raise BadRequest(f"statusIDs must be a list of statuses from 1 to 6, got {statuses!r}")
    dates = body.get("dates") or []
    if not isinstance(dates, list):
        raise BadRequest(f"dates must be a list of date filters, got {dates!r}")
    filters = [_date_filter(item) for item in dates]
    found = [
        row
        for row in cached(call.data, "supplies", supply_rows)
        if (not statuses or row["statusID"] in statuses) and _kept(row, filters)
    ]
    size = min(limit, call.config.page_for(METHOD.name, MAX_LIMIT))
    return json_reply(found[offset : offset + size])


def expected(data: SellerData, seller: SellerState, params: dict[str, Any]) -> list[Row]:
    """What a full pull without filters returns: every supply of the seller."""
    return cached(data, "supplies", supply_rows)


async def ping(call: Call) -> Response:
    """WB's answer once the gateway took the token: the time at WB and OK."""
    return json_reply({"TS": datetime.now(MOSCOW).isoformat(timespec="seconds"), "Status": "OK"})


EMULATED = EmulatedMethod(METHOD, handle, expected=expected)
EMULATED_PING = EmulatedMethod(PING, ping)
