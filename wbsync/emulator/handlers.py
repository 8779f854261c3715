"""One handler per emulated WB method: validate like WB, page like WB, answer in WB's shape.

A handler gets a ``Call`` (the request, the seller's data and edits) after the gateway part
(auth, limits, faults) has passed it, and returns a reply or raises ``BadRequest``.

Past 400 lines on purpose: the built-in handlers are small and registered by the
one table at the end, next to the ``Call`` they get and WB's parameter checks they share, so the
emulator's method list reads in one place (the rows they answer with are ``reports``' and
``adverts``').
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from wbsync.catalog.registry import BUILTIN, Claim, Registrar, Table
from wbsync.emulator import reports
from wbsync.emulator.adverts import NO_COMPANIES, advert_stats, has_stats
from wbsync.emulator.config import MOSCOW, EmulatorConfig
from wbsync.emulator.dataset import Row, SellerData
from wbsync.emulator.replies import BadRequest, json_reply
from wbsync.emulator.state import (
    EXPECTED,
    EmulatorState,
    Expectation,
    SellerState,
    bid_row,
    cached,
    parse_moscow,
    seller_campaigns,
)
from wbsync.emulator.state import rows_after as _after
from wbsync.emulator.wbdocs import METHODS, PING_HOSTS, Method
from wbsync.system import clock

__all__ = ["HANDLERS", "Call", "EmulatedMethod", "Handler"]


@dataclass(frozen=True, slots=True)
class Call:
    """One authorised request to a method."""

    request: Request
    method: str
    seller_id: str
    state: EmulatorState

    @property
    def data(self) -> SellerData:
        """The seller's generated data."""
        return self.state.data(self.seller_id)

    @property
    def seller(self) -> SellerState:
        """The seller's edits."""
        return self.state.seller(self.seller_id)

    @property
    def config(self) -> EmulatorConfig:
        """The emulator's configuration."""
        return self.state.config

    async def body(self) -> dict[str, Any]:
        """The JSON object body, or ``BadRequest``."""
        try:
            body = json.loads(await self.request.body() or b"null")
        except ValueError:
            raise BadRequest("request body is not valid JSON") from None
        if not isinstance(body, dict):
            raise BadRequest("request body must be a JSON object")
        return body

    def query(self, name: str) -> str | None:
        """A query parameter."""
        return self.request.query_params.get(name)


Handler = Callable[[Call], Awaitable[Response]]

HANDLERS: Table[Handler] = Table("emulated method handler")
"""Handler of each emulated method, by method name."""


@dataclass(frozen=True, slots=True)
class EmulatedMethod:
    """A WB method the emulator serves: its documented table row and the handler that answers
    it (after the gateway has checked the token, the limits and the faults)."""

    method: Method
    handler: Handler
    #: What a full pull returns (``/__emulator/expected``); None: the emulator answers 404.
    expected: Expectation | None = None

    def claims(self) -> Iterator[Claim]:
        """The method's name, in the method, handler and (if any) expectation tables."""
        yield from self.method.claims()
        yield Claim(HANDLERS, self.method.name, self.handler)
        if self.expected is not None:
            yield Claim(EXPECTED, self.method.name, self.expected)


def _int(value: Any, name: str, *, lo: int = 0, hi: int | None = None) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise BadRequest(f"{name} must be an integer") from None
    if number < lo or (hi is not None and number > hi):
        raise BadRequest(f"{name} must be between {lo} and {hi}")
    return number


def _date(value: Any, name: str) -> date:
    try:
        return date.fromisoformat(str(value)[:10])
    except ValueError:
        raise BadRequest(f"missing or invalid {name} params", "decode error") from None


def _ids(text: str | None, name: str, most: int) -> list[int]:
    if not text:
        return []
    ids = [_int(part, name) for part in text.split(",") if part.strip()]
    if len(ids) > most:
        raise BadRequest(f"{name}: at most {most} values")
    return ids


async def finance_detailed(call: Call) -> Response:
    """Finance detail: rows with rrDate in [dateFrom, dateTo] after rrdId; 204 at the end."""
    body = await call.body()
    lo, hi = _date(body.get("dateFrom"), "dateFrom"), _date(body.get("dateTo"), "dateTo")
    limit = _int(body.get("limit", 100_000), "limit", lo=1, hi=100_000)
    after = _int(body.get("rrdId", 0), "rrdId")
    page = min(limit, call.config.page_for(call.method, 100_000))
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


def _statistics(kind: str) -> Handler:
    build = reports.orders if kind == "orders" else reports.sales

    async def handler(call: Call) -> Response:
        raw = call.query("dateFrom")
        if not raw:
            raise BadRequest("dateFrom is required")
        try:
            since = parse_moscow(raw)
        except ValueError:
            raise BadRequest("dateFrom: invalid date") from None
        rows = cached(call.data, f"statistics.{kind}", build)
        if call.query("flag") == "1":
            day = since.date().isoformat()
            return json_reply([r for r in rows if r["date"][:10] == day])
        inclusive = call.config.statistics_date_from == ">="
        page = call.config.page_for(call.method, 80_000)
        return json_reply(_after(rows, since, inclusive=inclusive)[:page])

    return handler


#: WB's documented campaign statuses, the values its ``statuses`` filter takes (-1: deleted).
ADVERT_STATUSES = frozenset({-1, 4, 7, 8, 9, 11})


async def adverts(call: Call) -> Response:
    """Campaign list filtered by ids, statuses and payment type."""
    ids = set(_ids(call.query("ids"), "ids", 50))
    statuses = {_int(s, "statuses", lo=-1) for s in (call.query("statuses") or "").split(",") if s}
    if statuses - ADVERT_STATUSES:
        raise BadRequest(f"statuses: each one of {sorted(ADVERT_STATUSES)}")
    payment = call.query("payment_type")
    rows = [
        c
        for c in seller_campaigns(call.data, call.seller)
        if (not ids or c["id"] in ids)
        and (not statuses or c["status"] in statuses)
        and (not payment or c["settings"]["payment_type"] == payment)
    ]
    return json_reply({"adverts": rows})


async def fullstats(call: Call) -> Response:
    """Full stats of up to 50 campaigns over at most 31 days: those with statistics in the
    window (statuses 7, 9, 11, within their life); none: WB's 400 "no companies"."""
    ids = _ids(call.query("ids"), "ids", 50)
    if not ids:
        raise BadRequest("ids is required")
    begin, end = (
        _date(call.query("beginDate"), "beginDate"),
        _date(call.query("endDate"), "endDate"),
    )
    if end < begin or (end - begin).days > 31:
        raise BadRequest("the period must be at most 31 days, beginDate <= endDate")
    by_id = {c["id"]: c for c in seller_campaigns(call.data, call.seller)}
    rows = [
        advert_stats(call.data, by_id[i], begin, end)
        for i in ids
        if i in by_id and has_stats(call.data, by_id[i], begin, end)
    ]
    if not rows:
        return json_reply({"error": NO_COMPANIES}, status=400)
    return json_reply(rows)


def _items(body: dict[str, Any], key: str, most: int) -> list[dict[str, Any]]:
    items = body.get(key)
    if not isinstance(items, list) or not 1 <= len(items) <= most:
        raise BadRequest(f"{key}: 1 to {most} items required")
    if not all(isinstance(i, dict) for i in items):
        raise BadRequest(f"{key}: items must be objects")
    return items


async def get_bids(call: Call) -> Response:
    """Current search-cluster bids of (campaign, item) pairs."""
    wanted = {
        (_int(i.get("advert_id"), "advert_id"), _int(i.get("nm_id"), "nm_id"))
        for i in _items(await call.body(), "items", 100)
    }
    rows = [bid_row(k, v) for k, v in call.seller.bids.items() if (k[0], k[1]) in wanted]
    return json_reply({"bids": rows})


async def set_bids(call: Call) -> Response:
    """Set search-cluster bids (base currency units); remembered for get-bids.

    WB: only campaigns with a custom bid paid per mille; any other item refuses the call (400).
    """
    items = _items(await call.body(), "bids", 100)
    bids = call.seller.bids
    campaigns = {c["id"]: c for c in seller_campaigns(call.data, call.seller)}
    updates: dict[tuple[int, int, str], int] = {}
    for item in items:
        key = (
            _int(item.get("advert_id"), "advert_id"),
            _int(item.get("nm_id"), "nm_id"),
            str(item.get("norm_query", "")),
        )
        camp = campaigns.get(key[0])
        if camp is not None and camp["settings"]["payment_type"] != "cpm":
            raise BadRequest(f"invalid payment_type value (advert {key[0]})")
        if camp is not None and camp["bid_type"] != "manual":
            raise BadRequest(f"invalid bid_type value (advert {key[0]})")
        if key not in bids:
            raise BadRequest("some nms are not belong to advert", "Invalid Params")
        updates[key] = _int(item.get("bid"), "bid", lo=1) * 100
        if updates[key] < call.config.min_bid_kopecks:
            raise BadRequest(f"bid is below the minimum bid (advert {key[0]})")
    bids.update(updates)
    return Response(status_code=200)


#: WB serves the sales-funnel history of "a maximum of the last week": today and the 6 days
#: before it, today being Moscow's date (``EmulatorConfig.today``).
FUNNEL_DAYS = 7


def _funnel_period(call: Call, period: dict[str, Any]) -> tuple[date, date]:
    begin, end = _date(period.get("start"), "start"), _date(period.get("end"), "end")
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


def _v1_bid(item: dict[str, Any]) -> tuple[tuple[int, int, str], int]:
    """One v1 item's key and bid in kopecks, or ``BadRequest`` for a field of the wrong type."""
    query = item.get("normQuery")
    if not isinstance(query, str):
        raise BadRequest("normQuery must be a string")
    key = (_int(item.get("advertId"), "advertId"), _int(item.get("nmId"), "nmId"), query)
    return key, _int(item.get("bidMinorUnits"), "bidMinorUnits")


def _v1_refusal(call: Call, key: tuple[int, int, str], kopecks: int) -> str | None:
    """Why WB does not set this one bid; None when it does."""
    if key not in call.seller.bids:
        return "search cluster not found for this advert and nm"
    if kopecks < call.config.min_bid_kopecks:
        return f"bid is below the minimum bid of {call.config.min_bid_kopecks} minor units"
    return None


async def set_bids_v1(call: Call) -> Response:
    """Set search-cluster bids in kopecks (WB's v1); the reply lists each bid as set or failed.

    The whole call is refused (400) for a malformed body or a campaign that does not take bids
    (WB's documented 400 is "invalid payment_type value", as for v0); a bid WB cannot set (an
    unknown campaign, item or cluster, a bid below the minimum) fails alone with its reason.
    """
    wanted = [_v1_bid(item) for item in _items(await call.body(), "bids", 100)]
    campaigns = {c["id"]: c for c in seller_campaigns(call.data, call.seller)}
    for (advert_id, _, _), _ in wanted:
        camp = campaigns.get(advert_id)
        if camp is not None and camp["settings"]["payment_type"] != "cpm":
            raise BadRequest(f"invalid payment_type value (advert {advert_id})")
        if camp is not None and camp["bid_type"] != "manual":
            raise BadRequest(f"invalid bid_type value (advert {advert_id})")
    success, failed = [], []
    for key, kopecks in wanted:
        named = {"advertId": key[0], "nmId": key[1], "normQuery": key[2]}
        reason = _v1_refusal(call, key, kopecks)
        if reason is None:
            call.seller.bids[key] = kopecks
            success.append({**named, "currency": "RUB"})
        else:
            failed.append({**named, "reason": reason})
    return json_reply({"success": success, "failed": failed})


async def funnel_history(call: Call) -> Response:
    """Sales-funnel history of up to 20 items, by day or week, within the last week."""
    body = await call.body()
    nm_ids = body.get("nmIds")
    if not isinstance(nm_ids, list) or not 1 <= len(nm_ids) <= 20:
        raise BadRequest("nmIds: 1 to 20 items required")
    begin, end = _funnel_period(call, body.get("selectedPeriod") or {})
    week = body.get("aggregationLevel", "day") == "week"
    rows = []
    for nm in nm_ids:
        product = call.data.product(_int(nm, "nmIds"))
        if product is not None:
            rows.append(call.data.funnel_item(product, begin, end, week))
    return json_reply(rows)


async def stocks(call: Call) -> Response:
    """Stocks by WB warehouses: offset paging."""
    body = await call.body()
    nm_ids = set(body.get("nmIds") or [])
    if len(nm_ids) > 1000:
        raise BadRequest("nmIds: at most 1000")
    chrt_ids = set(body.get("chrtIds") or [])
    limit = _int(body.get("limit", 250_000), "limit", lo=1, hi=250_000)
    offset = _int(body.get("offset", 0), "offset")
    rows = [
        r
        for r in cached(call.data, "stocks", SellerData.stocks)
        if (not nm_ids or r["nmId"] in nm_ids)
        and (not chrt_ids or not nm_ids or r["chrtId"] in chrt_ids)
    ]
    page = min(limit, call.config.page_for(call.method, 250_000))
    return json_reply({"data": {"items": rows[offset : offset + page]}})


def _card_key(card: Row) -> tuple[datetime, int]:
    return (datetime.fromisoformat(card["updatedAt"]), card["nmID"])


async def cards_list(call: Call) -> Response:
    """Cards list with the (updatedAt, nmID) cursor; ``total`` is the count in this reply."""
    settings = (await call.body()).get("settings") or {}
    cursor = settings.get("cursor") or {}
    limit = min(
        _int(cursor.get("limit", 100), "limit", lo=1, hi=100),
        call.config.page_for(call.method, 100),
    )
    ascending = bool((settings.get("sort") or {}).get("ascending", False))
    cards = cached(call.data, "cards", SellerData.cards)
    ordered = cards if ascending else list(reversed(cards))
    if cursor.get("updatedAt") and cursor.get("nmID") is not None:
        try:
            mark = (datetime.fromisoformat(str(cursor["updatedAt"])), int(cursor["nmID"]))
        except ValueError:
            raise BadRequest("cursor: invalid updatedAt or nmID") from None
        ordered = [
            c for c in ordered if (_card_key(c) > mark if ascending else _card_key(c) < mark)
        ]
    page = ordered[:limit]
    last = page[-1] if page else {"updatedAt": cursor.get("updatedAt"), "nmID": cursor.get("nmID")}
    return json_reply(
        {
            "cards": page,
            "cursor": {"updatedAt": last["updatedAt"], "nmID": last["nmID"], "total": len(page)},
        }
    )


async def goods_list(call: Call) -> Response:
    """Goods with prices: limit + offset until an empty list."""
    limit = _int(call.query("limit"), "limit", lo=1, hi=1000)
    offset = _int(call.query("offset") or 0, "offset")
    rows = call.data.goods(call.seller.prices)
    if call.query("filterNmID"):
        nm = _int(call.query("filterNmID"), "filterNmID")
        rows = [r for r in rows if r["nmID"] == nm]
    page = min(limit, call.config.page_for(call.method, 1000))
    return json_reply(
        {"data": {"listGoods": rows[offset : offset + page]}, "error": False, "errorText": ""}
    )


async def upload_task(call: Call) -> Response:
    """Price upload: remembered, applied to the goods list, answered with a task id."""
    items = _items(await call.body(), "data", 1000)
    goods: list[Row] = []
    for item in items:
        nm = _int(item.get("nmID"), "nmID")
        if call.data.product(nm) is None:
            raise BadRequest("Invalid nmID", "invalid data")
        price, discount = item.get("price"), item.get("discount")
        if price is None and discount is None:
            raise BadRequest("price and discount can not be empty both", "invalid data")
        goods.append(
            {
                "nmID": nm,
                "price": None if price is None else _int(price, "price"),
                "discount": None if discount is None else _int(discount, "discount", hi=99),
            }
        )
    seller = call.seller
    if seller.uploads and seller.uploads[-1]["data"] == goods:
        task_id = seller.uploads[-1]["id"]
        return json_reply(
            {
                "data": {"id": task_id, "alreadyExists": True},
                "error": False,
                "errorText": "This task already exists",
            },
            status=208,
        )
    task_id = call.state.next_task_id
    call.state.next_task_id += 1
    seller.uploads.append({"id": task_id, "data": goods})
    for g in goods:
        product = call.data.product(g["nmID"])
        old = seller.prices.get(g["nmID"], (product.price, product.discount) if product else (0, 0))
        seller.prices[g["nmID"]] = (
            old[0] if g["price"] is None else g["price"],
            old[1] if g["discount"] is None else g["discount"],
        )
    return json_reply(
        {"data": {"id": task_id, "alreadyExists": False}, "error": False, "errorText": ""}
    )


async def coefficients(call: Call) -> Response:
    """Acceptance coefficients, optionally for some warehouses."""
    wanted = set(_ids(call.query("warehouseIDs"), "warehouseIDs", 10**6))
    rows = cached(call.data, "coefficients", SellerData.coefficients)
    return json_reply([r for r in rows if not wanted or r["warehouseID"] in wanted])


async def ping(call: Call) -> Response:
    """WB's connection check: the gateway has already judged the token for this host."""
    now = clock.calendar_now().astimezone(MOSCOW).isoformat(timespec="seconds")
    return json_reply({"TS": now, "Status": "OK"})


async def seller_info(call: Call) -> Response:
    """The seller's name and account id (the token's ``sid``), in WB's shape."""
    return json_reply(call.data.seller_info())


_BUILTIN_HANDLERS: dict[str, Handler] = {
    "finance.detailed_report": finance_detailed,
    "statistics.orders": _statistics("orders"),
    "statistics.sales": _statistics("sales"),
    "promotion.adverts": adverts,
    "promotion.fullstats": fullstats,
    "promotion.get_bids": get_bids,
    "promotion.set_bids": set_bids,
    "promotion.set_bids_v1": set_bids_v1,
    "analytics.sales_funnel_history": funnel_history,
    "analytics.stocks_wb_warehouses": stocks,
    "content.cards_list": cards_list,
    "prices.goods_list": goods_list,
    "prices.upload_task": upload_task,
    "tariffs.acceptance_coefficients": coefficients,
    "tariffs.seller_info": seller_info,
    **{f"{name}.ping": ping for name, _ in PING_HOSTS.values()},
}

_builtin = Registrar(BUILTIN)
_builtin.declare(*(EmulatedMethod(METHODS[n], h) for n, h in _BUILTIN_HANDLERS.items()))
_builtin.commit()
