"""Deterministic data of one emulated seller: products, cards, prices, stocks, funnel, tariffs.

Everything is derived from (seed, seller id, sizes, anchor date) with string-seeded RNGs, so two
processes (the emulator and a test) compute the same rows. The dated history (funnel, advert
stats) and the acceptance coefficients end or start at ``today`` (the anchor unless a scaled
calendar moved it, ``EmulatorConfig.calendar_origin``), each day's rows seeded by the day, so a
day keeps its numbers as the window moves over it; the rest stays generated from the anchor.
Reports (finance, statistics, adverts) are in ``reports.py``. Rows are plain dicts with WB's
field names.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from functools import cached_property
from typing import Any

from wbsync.emulator.config import SellerSizes

__all__ = ["Product", "SellerData", "Size"]

Row = dict[str, Any]

# The cached rows that depend on the day (``SellerData.on`` drops them).
_DATED = frozenset({"coefficients"})

SUBJECTS = [(105, "Кроссовки"), (192, "Футболки"), (1724, "Рюкзаки"), (2967, "Кружки")]
BRANDS = ["Demix", "Nordway", "Termit", "Outventure"]
WAREHOUSES = [
    (507, "Коледино"),
    (117501, "Подольск"),
    (686, "Новосибирск"),
    (1733, "Екатеринбург"),
    (120762, "Электросталь"),
    (206348, "Тула"),
    (130744, "Краснодар"),
    (117986, "Казань"),
]
REGIONS = [("Центральный", "Московская"), ("Приволжский", "Татарстан"), ("Сибирский", "Омская")]


@dataclass(frozen=True, slots=True)
class Size:
    """One size of a product (a ``chrtID``)."""

    chrt_id: int
    tech_size: str
    barcode: str


@dataclass(frozen=True, slots=True)
class Product:
    """One listing (nmID) with what every section needs to know about it."""

    index: int
    nm_id: int
    imt_id: int
    vendor_code: str
    brand: str
    subject_id: int
    subject_name: str
    title: str
    sizes: tuple[Size, ...]
    price: int
    discount: int
    updated_at: datetime


def rng(seed: int, seller_id: str, kind: str) -> random.Random:
    """A private RNG for one kind of data of one seller; str seeds are stable across runs."""
    return random.Random(f"{seed}:{seller_id}:{kind}")


def iso_z(moment: datetime) -> str:
    """RFC 3339 in UTC with a Z, microseconds kept (content's updatedAt style)."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class SellerData:
    """All generated rows of one seller (computed lazily, cached)."""

    seed: int
    seller_id: str
    sizes: SellerSizes
    anchor: date
    today: date | None = None
    """The dated data's last day when a scaled calendar moved it past ``anchor``."""
    #: WB reads the statistics' ``dateFrom`` as ``>=`` (its documents) or ``>``
    #: (``EmulatorConfig.statistics_date_from``): which rows a pull from a moment returns.
    date_from_inclusive: bool = True
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def last_day(self) -> date:
        """The last day of the dated history (the first of the coefficients)."""
        return self.anchor if self.today is None else self.today

    def on(self, today: date) -> SellerData:
        """This seller's data with the dated part moved to ``today``; what does not depend on
        the day (products, reports from the anchor) is shared, not generated again."""
        moved = SellerData(
            self.seed,
            self.seller_id,
            self.sizes,
            self.anchor,
            today,
            self.date_from_inclusive,
            {k: v for k, v in self._cache.items() if k not in _DATED},
        )
        for name in ("nm_base", "products"):
            if name in self.__dict__:
                moved.__dict__[name] = self.__dict__[name]
        return moved

    def rng(self, kind: str) -> random.Random:
        """The seller's RNG for ``kind``."""
        return rng(self.seed, self.seller_id, kind)

    @cached_property
    def nm_base(self) -> int:
        """First nmID of this seller: sellers never share item numbers."""
        return 10_000_000 + self.rng("nm").randrange(1, 90_000) * 1000

    @cached_property
    def products(self) -> list[Product]:
        """The seller's listings, by nmID ascending."""
        r = self.rng("products")
        start = datetime(self.anchor.year, self.anchor.month, self.anchor.day) - timedelta(days=60)
        out: list[Product] = []
        for i in range(self.sizes.products):
            nm = self.nm_base + i
            subj_id, subj = SUBJECTS[r.randrange(len(SUBJECTS))]
            n_sizes = r.randint(1, 3)
            sizes = tuple(
                Size(
                    chrt_id=nm * 10 + k,
                    tech_size=str(40 + 2 * k) if n_sizes > 1 else "0",
                    barcode=f"20{nm:010d}{k}",
                )
                for k in range(n_sizes)
            )
            out.append(
                Product(
                    index=i,
                    nm_id=nm,
                    imt_id=nm + 500_000_000,
                    vendor_code=f"ART-{self.seller_id[:4]}-{i:04d}",
                    brand=BRANDS[r.randrange(len(BRANDS))],
                    subject_id=subj_id,
                    subject_name=subj,
                    title=f"{subj} модель {i}",
                    sizes=sizes,
                    price=r.randrange(500, 9000, 10),
                    discount=r.choice([0, 5, 10, 15, 20, 30]),
                    # Distinct, increasing: the cards cursor is (updatedAt, nmID).
                    updated_at=start + timedelta(minutes=37 * i, microseconds=r.randrange(10**6)),
                )
            )
        return out

    def product(self, nm_id: int) -> Product | None:
        """The product with ``nm_id``, if it is this seller's."""
        i = nm_id - self.nm_base
        return self.products[i] if 0 <= i < len(self.products) else None

    def pick(self, r_value: int) -> Product | None:
        """The listing a random draw picks (a report row's item), None when there is none."""
        products = self.products
        return products[r_value % len(products)] if products else None

    # Content -------------------------------------------------------------------------------

    def card(self, p: Product) -> Row:
        """The cards-list entry of ``p``."""
        nm = p.nm_id
        photo = f"https://basket-01.wbbasket.ru/vol{nm // 100000}/part{nm // 1000}/{nm}/images"
        return {
            "nmID": p.nm_id,
            "imtID": p.imt_id,
            "nmUUID": str(uuid.uuid5(uuid.NAMESPACE_URL, f"wb-nm:{p.nm_id}")),
            "subjectID": p.subject_id,
            "subjectName": p.subject_name,
            "vendorCode": p.vendor_code,
            "brand": p.brand,
            "title": p.title,
            "description": f"{p.title}: описание товара",
            "needKiz": False,
            "photos": [
                {
                    "big": f"{photo}/big/1.webp",
                    "c246x328": f"{photo}/c246x328/1.webp",
                    "c516x688": f"{photo}/c516x688/1.webp",
                    "square": f"{photo}/square/1.webp",
                    "tm": f"{photo}/tm/1.webp",
                }
            ],
            "video": "",
            "wholesale": {"enabled": False, "quantum": 0},
            "dimensions": {
                "length": 30,
                "width": 20,
                "height": 10,
                "weightBrutto": 0.8,
                "isValid": True,
            },
            "characteristics": [
                {"id": 14177451, "name": "Количество предметов в упаковке", "value": ["1 шт."]}
            ],
            "sizes": [
                {"chrtID": s.chrt_id, "techSize": s.tech_size, "wbSize": "", "skus": [s.barcode]}
                for s in p.sizes
            ],
            "tags": [],
            "createdAt": iso_z(p.updated_at - timedelta(days=30)),
            "updatedAt": iso_z(p.updated_at),
        }

    def cards(self) -> list[Row]:
        """Every card, ascending by (updatedAt, nmID): a full ascending pull's rows."""
        return [self.card(p) for p in self.products]

    # Prices --------------------------------------------------------------------------------

    def goods(self, prices: dict[int, tuple[int, int]]) -> list[Row]:
        """The goods price list; ``prices`` holds uploaded (price, discount) by nmID."""
        out: list[Row] = []
        for p in self.products:
            price, discount = prices.get(p.nm_id, (p.price, p.discount))
            disc_price = round(price * (100 - discount) / 100, 2)
            out.append(
                {
                    "nmID": p.nm_id,
                    "vendorCode": p.vendor_code,
                    "sizes": [
                        {
                            "sizeID": s.chrt_id,
                            "price": price,
                            "discountedPrice": disc_price,
                            "clubDiscountedPrice": round(disc_price * 0.95, 2),
                            "techSizeName": s.tech_size,
                        }
                        for s in p.sizes
                    ],
                    "currencyIsoCode4217": "RUB",
                    "discount": discount,
                    "clubDiscount": 5,
                    "editableSizePrice": False,
                }
            )
        return out

    # Stocks --------------------------------------------------------------------------------

    def stocks(self) -> list[Row]:
        """Stocks by WB warehouses: one row per product size (WB now reports one 'Склад WB')."""
        r = self.rng("stocks")
        return [
            {
                "nmId": p.nm_id,
                "chrtId": s.chrt_id,
                "warehouseId": -999999,
                "warehouseName": "Склад WB",
                "regionName": "Склад WB",
                "quantity": r.randrange(0, 300),
                "inWayToClient": r.randrange(0, 20),
                "inWayFromClient": r.randrange(0, 10),
            }
            for p in self.products
            for s in p.sizes
        ]

    # Sales funnel --------------------------------------------------------------------------

    @property
    def history_days(self) -> list[date]:
        """The days the funnel and advert history cover, oldest first, ending at ``last_day``."""
        last = self.last_day
        return [last - timedelta(days=k) for k in range(self.sizes.days - 1, -1, -1)]

    def funnel_day(self, p: Product, day: date) -> Row:
        """One product's funnel numbers for one day."""
        r = self.rng(f"funnel:{p.nm_id}:{day.isoformat()}")
        opens = r.randrange(20, 400)
        carts = r.randrange(0, opens // 2 + 1)
        orders = r.randrange(0, carts + 1)
        buyouts = r.randrange(0, orders + 1)
        return {
            "date": day.isoformat(),
            "openCount": opens,
            "cartCount": carts,
            "orderCount": orders,
            "orderSum": orders * p.price,
            "buyoutCount": buyouts,
            "buyoutSum": buyouts * p.price,
            "buyoutPercent": 100 * buyouts // orders if orders else 0,
            "addToCartConversion": 100 * carts // opens if opens else 0,
            "cartToOrderConversion": 100 * orders // carts if carts else 0,
            "addToWishlistCount": r.randrange(0, 30),
        }

    def funnel_item(self, p: Product, start: date, end: date, week: bool = False) -> Row:
        """One product's history between ``start`` and ``end`` (inclusive)."""
        days = [d for d in self.history_days if start <= d <= end]
        history = [self.funnel_day(p, d) for d in days]
        if week:
            history = _by_week(history)
        return {
            "product": {
                "nmId": p.nm_id,
                "title": p.title,
                "vendorCode": p.vendor_code,
                "brandName": p.brand,
                "subjectId": p.subject_id,
                "subjectName": p.subject_name,
            },
            "history": history,
            "currency": "RUB",
        }

    # Tariffs -------------------------------------------------------------------------------

    def seller_info(self) -> Row:
        """WB's seller information: name, account id, tax number and trade mark (made up)."""
        r = self.rng("seller")
        return {
            "name": f"ИП Продавец {self.seller_id[:8]}",
            "sid": self.seller_id,
            "tin": "".join(str(r.randrange(10)) for _ in range(12)),
            "tradeMark": f"Store {self.seller_id[:4].upper()}",
        }

    def coefficients(self) -> list[Row]:
        """Acceptance coefficients for 14 days from ``last_day``, per warehouse and box type."""
        out: list[Row] = []
        for wh_id, wh_name in WAREHOUSES[: self.sizes.warehouses]:
            for k in range(14):
                day = self.last_day + timedelta(days=k)
                r = self.rng(f"coefficients:{wh_id}:{day.isoformat()}")
                for box in (2, 5):
                    coef = r.choice([-1, -1, 0, 0, 1, 2, 5])
                    out.append(
                        {
                            "date": f"{day.isoformat()}T00:00:00Z",
                            "coefficient": coef,
                            "warehouseID": wh_id,
                            "warehouseName": wh_name,
                            "allowUnload": coef >= 0,
                            "boxTypeID": box,
                            "storageCoef": "100",
                            "deliveryCoef": "165",
                            "deliveryBaseLiter": "46.2",
                            "deliveryAdditionalLiter": "14",
                            "storageBaseLiter": "0.08" if box == 2 else "30",
                            "storageAdditionalLiter": "0.08" if box == 2 else None,
                            "isSortingCenter": False,
                        }
                    )
        return out


def _by_week(days: list[Row]) -> list[Row]:
    weeks: dict[str, Row] = {}
    for row in days:
        d = date.fromisoformat(row["date"])
        monday = (d - timedelta(days=d.weekday())).isoformat()
        acc = weeks.setdefault(monday, {k: 0 for k in row} | {"date": monday})
        for k, v in row.items():
            if k != "date":
                acc[k] += v
    for acc in weeks.values():
        acc["buyoutPercent"] = (
            100 * acc["buyoutCount"] // acc["orderCount"] if acc["orderCount"] else 0
        )
        acc["addToCartConversion"] = (
            100 * acc["cartCount"] // acc["openCount"] if acc["openCount"] else 0
        )
        acc["cartToOrderConversion"] = (
            100 * acc["orderCount"] // acc["cartCount"] if acc["cartCount"] else 0
        )
    return list(weeks.values())
