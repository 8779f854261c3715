"""WB's "Rates, News, Get Seller Information" section (common-api): a token of any category.

The acceptance coefficients, which WB's documents mark temporarily disabled, and the seller's
information.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from wbsync.emulator.dataset import Row, SellerData
from wbsync.emulator.emulated import Call, EmulatedMethod, ping
from wbsync.emulator.method import HOUR, MINUTE, Method, Rate, rates
from wbsync.emulator.params import ids
from wbsync.emulator.replies import json_reply
from wbsync.emulator.state import SellerState, cached

ACCEPTANCE_COEFFICIENTS = Method(
    "tariffs.acceptance_coefficients",
    "GET",
    "/api/tariffs/v1/acceptance/coefficients",
    "common-api",
    None,
    rates(Rate(MINUTE, 6, 6), Rate(HOUR, 1, 1)),
    disabled_in_docs=True,
    x_category="commonapi",
)
#: "Get Seller Information": Base tokens one a day.
SELLER_INFO = Method(
    "tariffs.seller_info",
    "GET",
    "/api/v1/seller-info",
    "common-api",
    None,
    rates(Rate(MINUTE, 1, 10), Rate(24 * HOUR, 1, 1)),
    x_category="commonapi",
)


async def coefficients(call: Call) -> Response:
    """Acceptance coefficients, optionally for some warehouses."""
    wanted = set(ids(call.query("warehouseIDs"), "warehouseIDs", 10**6))
    rows = cached(call.data, "coefficients", SellerData.coefficients)
    return json_reply([r for r in rows if not wanted or r["warehouseID"] in wanted])


def coefficients_rows(data: SellerData, seller: SellerState, params: dict[str, Any]) -> list[Row]:
    """Every warehouse's coefficients."""
    return cached(data, "coefficients", SellerData.coefficients)


async def seller_info(call: Call) -> Response:
    """The seller's name and account id (the token's ``sid``), in WB's shape."""
    return json_reply(call.data.seller_info())


EMULATED = (
    EmulatedMethod(ACCEPTANCE_COEFFICIENTS, coefficients, expected=coefficients_rows),
    EmulatedMethod(SELLER_INFO, seller_info),
    ping("common-api", "tariffs", None),
)
