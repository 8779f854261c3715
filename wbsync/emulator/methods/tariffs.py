"""WB's "Rates, News, Get Seller Information" section (common-api): a token of any category.

The acceptance coefficients, which WB's documents mark temporarily disabled, the seller's
information, and WB's tariffs: box, pallet and return rates per warehouse and date, and WB's fee
per item subject.

WB serves the tariffs the same to every seller: the emulator generates them from its seed and
the date asked, never from the seller, so every token gets the same rows. Each has WB's limits
per seller (the box, pallet and return rates 60 a minute, burst 5, Base tokens 1 an hour; the
commission 1 a minute, burst 2, Base tokens 5 an hour, burst 1). Rates are strings with WB's
decimal commas ("11,2"), as WB sends them. ``date`` (``YYYY-MM-DD``) is required by the rates,
``locale`` (``ru``, ``en``, ``zh``) optional for the commission.
"""

from __future__ import annotations

import random
from datetime import date
from typing import Any

from starlette.responses import Response

from wbsync.emulator.dataset import Row, SellerData
from wbsync.emulator.emulated import Call, EmulatedMethod, ping
from wbsync.emulator.method import HOUR, MINUTE, Method, Rate, rates
from wbsync.emulator.params import ids
from wbsync.emulator.replies import BadRequest, json_reply
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


#: The warehouses WB lists rates for (the same every day).
WAREHOUSES = (
    "Коледино",
    "Подольск",
    "Электросталь",
    "Казань",
    "Краснодар",
    "Екатеринбург",
    "Новосибирск",
    "Санкт-Петербург Уткина Заводь",
    "Тула",
    "Невинномысск",
    "СЦ Брест",
    "Склад WB РФ",
)
#: Item subjects in WB's fee table.
SUBJECTS = 40
LOCALES = ("ru", "en", "zh")

_PER_SELLER_RATES = rates(Rate(MINUTE, 60, 5), Rate(HOUR, 1, 1))


def _method(name: str, path: str, limits: dict[Any, Rate]) -> Method:
    return Method(
        f"tariffs.{name}", "GET", path, "common-api", None, limits, x_category="commonapi"
    )


BOX = _method("box", "/api/v1/tariffs/box", _PER_SELLER_RATES)
PALLET = _method("pallet", "/api/v1/tariffs/pallet", _PER_SELLER_RATES)
RETURN = _method("return", "/api/v1/tariffs/return", _PER_SELLER_RATES)
COMMISSION = _method(
    "commission", "/api/v1/tariffs/commission", rates(Rate(MINUTE, 1, 2), Rate(HOUR, 5, 1))
)


def _rng(data: SellerData, kind: str, day: str) -> random.Random:
    # The emulator's seed and the day, never the seller: every seller sees the same tariffs.
    return random.Random(f"{data.seed}:tariffs:{kind}:{day}")


def _money(r: random.Random, low: int, high: int) -> str:
    """A rate as WB writes it: a string, a decimal comma when it has a fraction."""
    value = r.randrange(low * 10, high * 10) / 10
    return f"{value:g}".replace(".", ",")


def _box(r: random.Random, name: str) -> Row:
    return {
        "warehouseName": name,
        "geoName": "Россия",
        "boxDeliveryBase": _money(r, 30, 90),
        "boxDeliveryCoefExpr": str(r.randrange(100, 250, 5)),
        "boxDeliveryLiter": _money(r, 5, 20),
        "boxDeliveryMarketplaceBase": _money(r, 30, 90),
        "boxDeliveryMarketplaceCoefExpr": str(r.randrange(100, 250, 5)),
        "boxDeliveryMarketplaceLiter": _money(r, 5, 20),
        "boxStorageBase": _money(r, 0, 1),
        "boxStorageCoefExpr": str(r.randrange(100, 250, 5)),
        "boxStorageLiter": _money(r, 0, 1),
    }


def _pallet(r: random.Random, name: str) -> Row:
    return {
        "warehouseName": name,
        "palletDeliveryExpr": str(r.randrange(100, 250, 5)),
        "palletDeliveryValueBase": _money(r, 30, 90),
        "palletDeliveryValueLiter": _money(r, 5, 20),
        "palletStorageExpr": str(r.randrange(100, 250, 5)),
        "palletStorageValueExpr": _money(r, 20, 60),
    }


def _return(r: random.Random, name: str) -> Row:
    return {
        "warehouseName": name,
        "deliveryDumpKgtOfficeBase": f"1 {r.randrange(0, 999):03d}",
        "deliveryDumpKgtOfficeLiter": _money(r, 5, 15),
        "deliveryDumpKgtReturnExpr": f"1 {r.randrange(0, 999):03d}",
        "deliveryDumpSrgOfficeExpr": str(r.randrange(100, 300)),
        "deliveryDumpSrgReturnExpr": str(r.randrange(100, 300)),
        "deliveryDumpSupCourierBase": str(r.randrange(150, 300)),
        "deliveryDumpSupCourierLiter": _money(r, 5, 15),
        "deliveryDumpSupOfficeBase": str(r.randrange(100, 200)),
        "deliveryDumpSupOfficeLiter": _money(r, 5, 15),
        "deliveryDumpSupReturnExpr": str(r.randrange(200, 300)),
    }


_KINDS = {"box": _box, "pallet": _pallet, "return": _return}
# The reply's own fields beside the list, in WB's names per kind.
_NEXT = {"box": ("dtNextBox",), "pallet": ("dtNextPallet",), "return": ("dtNextDeliveryDumpKgt",)}


def warehouse_rates(data: SellerData, kind: str, day: str) -> list[Row]:
    """Every warehouse's rates of ``kind`` on ``day`` (WB's rows, in WB's order)."""
    r = _rng(data, kind, day)
    return [_KINDS[kind](r, name) for name in WAREHOUSES]


def commission_rows(data: SellerData, locale: str) -> list[Row]:
    """WB's fee of every subject, names in ``locale``."""
    r = _rng(data, "commission", "")
    rows = []
    for i in range(SUBJECTS):
        parent = 600 + i // 8
        subject = 6000 + i * 7
        rows.append(
            {
                "kgvpBooking": r.randrange(50, 300) / 10,
                "kgvpMarketplace": r.randrange(50, 300) / 10,
                "kgvpPickup": r.randrange(50, 300) / 10,
                "kgvpSupplier": r.randrange(50, 300) / 10,
                "kgvpSupplierExpress": r.randrange(10, 100) / 10,
                "paidStorageKgvp": r.randrange(50, 300) / 10,
                "parentID": parent,
                "parentName": f"Категория {parent}" if locale == "ru" else f"Category {parent}",
                "subjectID": subject,
                "subjectName": f"Предмет {subject}" if locale == "ru" else f"Subject {subject}",
            }
        )
    return rows


def _day(call: Call) -> str:
    text = call.query("date")
    try:
        return date.fromisoformat(text or "").isoformat()
    except ValueError:
        raise BadRequest("invalid parameter: date (YYYY-MM-DD)") from None


def _rates_handler(kind: str) -> Any:
    async def handle(call: Call) -> Response:
        """One kind of WB's rates of every warehouse on the ``date`` asked."""
        day = _day(call)
        data: dict[str, Any] = {"currency": "RUB", "dtTillMax": day}
        data.update(dict.fromkeys(_NEXT[kind], day))
        data["warehouseList"] = warehouse_rates(call.data, kind, day)
        return json_reply({"response": {"data": data}})

    return handle


def _expected(kind: str) -> Any:
    def expected(data: SellerData, seller: SellerState, params: dict[str, Any]) -> list[Row]:
        """What a run stores (``/__emulator/expected``): the rates on ``end`` (the last day of
        the window; default: the emulator's last day), each row with the ``date`` asked and
        the reply's own fields."""
        day = params.get("end") or data.last_day.isoformat()
        shared = {"currency": "RUB", "dtTillMax": day, **dict.fromkeys(_NEXT[kind], day)}
        return [{**shared, **row, "date": day} for row in warehouse_rates(data, kind, day)]

    return expected


async def commission(call: Call) -> Response:
    """WB's fee of every subject, names in ``locale`` (``ru`` by default)."""
    locale = call.query("locale") or "ru"
    if locale not in LOCALES:
        raise BadRequest("invalid parameter: locale")
    return json_reply({"report": commission_rows(call.data, locale)})


def commission_expected(data: SellerData, seller: SellerState, params: dict[str, Any]) -> list[Row]:
    """Every subject's fee (``locale`` parameter, ``ru`` by default)."""
    return commission_rows(data, params.get("locale", "ru"))


EMULATED = (
    EmulatedMethod(ACCEPTANCE_COEFFICIENTS, coefficients, expected=coefficients_rows),
    EmulatedMethod(SELLER_INFO, seller_info),
    ping("common-api", "tariffs", None),
    EmulatedMethod(BOX, _rates_handler("box"), expected=_expected("box")),
    EmulatedMethod(PALLET, _rates_handler("pallet"), expected=_expected("pallet")),
    EmulatedMethod(RETURN, _rates_handler("return"), expected=_expected("return")),
    EmulatedMethod(COMMISSION, commission, expected=commission_expected),
)
