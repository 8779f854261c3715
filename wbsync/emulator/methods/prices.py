"""WB's Prices and Discounts section (discounts-prices-api): the goods list and price uploads.

"For all methods in the Prices and Discounts category": the section is one budget (group
``prices``). An upload is remembered in the seller's ``SellerState`` and changes the goods list.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from wbsync.emulator.dataset import Row, SellerData
from wbsync.emulator.emulated import Call, EmulatedMethod, ping
from wbsync.emulator.method import HOUR, SECOND, Method, Rate, rates
from wbsync.emulator.params import integer, items
from wbsync.emulator.replies import BadRequest, json_reply
from wbsync.emulator.state import SellerState

#: The most goods one page, or one upload, holds.
PAGE_MAX = 1000

_PRICES = rates(Rate(6 * SECOND, 10, 5), Rate(HOUR, 4, 1))
_HOST, _X = "discounts-prices-api", "discountsandprices"

GOODS_LIST = Method(
    "prices.goods_list",
    "GET",
    "/api/v2/list/goods/filter",
    _HOST,
    "prices",
    _PRICES,
    group="prices",
    x_category=_X,
)
UPLOAD_TASK = Method(
    "prices.upload_task",
    "POST",
    "/api/v2/upload/task",
    _HOST,
    "prices",
    _PRICES,
    group="prices",
    writes=True,
    x_category=_X,
)


async def goods_list(call: Call) -> Response:
    """Goods with prices: limit + offset until an empty list."""
    limit = integer(call.query("limit"), "limit", lo=1, hi=PAGE_MAX)
    offset = integer(call.query("offset") or 0, "offset")
    rows = call.data.goods(call.seller.prices)
    if call.query("filterNmID"):
        nm = integer(call.query("filterNmID"), "filterNmID")
        rows = [r for r in rows if r["nmID"] == nm]
    page = min(limit, call.config.page_for(call.method, PAGE_MAX))
    return json_reply(
        {"data": {"listGoods": rows[offset : offset + page]}, "error": False, "errorText": ""}
    )


def goods_rows(data: SellerData, seller: SellerState, params: dict[str, Any]) -> list[Row]:
    """Every item with its price and discount, uploads applied."""
    return data.goods(seller.prices)


def _goods(call: Call, wanted: list[dict[str, Any]]) -> list[Row]:
    goods: list[Row] = []
    for item in wanted:
        nm = integer(item.get("nmID"), "nmID")
        if call.data.product(nm) is None:
            raise BadRequest("Invalid nmID", "invalid data")
        price, discount = item.get("price"), item.get("discount")
        if price is None and discount is None:
            raise BadRequest("price and discount can not be empty both", "invalid data")
        goods.append(
            {
                "nmID": nm,
                "price": None if price is None else integer(price, "price"),
                "discount": None if discount is None else integer(discount, "discount", hi=99),
            }
        )
    return goods


async def upload_task(call: Call) -> Response:
    """Price upload: remembered, applied to the goods list, answered with a task id."""
    goods = _goods(call, items(await call.body(), "data", PAGE_MAX))
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


def uploads_rows(data: SellerData, seller: SellerState, params: dict[str, Any]) -> list[Row]:
    """Every upload so far (its task id and goods), oldest first."""
    return list(seller.uploads)


EMULATED = (
    EmulatedMethod(GOODS_LIST, goods_list, expected=goods_rows),
    EmulatedMethod(UPLOAD_TASK, upload_task, expected=uploads_rows),
    ping(_HOST, "prices", "prices"),
)
