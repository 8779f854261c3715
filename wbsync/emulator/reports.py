"""Deterministic report rows of one seller: finance detail, statistics orders and sales.

The advert rows are ``wbsync.emulator.adverts``'.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any

from wbsync.emulator.dataset import REGIONS, WAREHOUSES, Row, SellerData

__all__ = ["finance_rows", "orders", "sales"]

#: Every field of a finance detail row with a neutral value (money is a string), as WB's OpenAPI
#: of October 2026 reads the report: ``sellerPromo`` is a number; a date WB does not have (a
#: tariff not fixed, a sale with no UTD) is null, never "" (WB declares these fields dates).
_FINANCE_DEFAULTS: dict[str, Any] = {
    "reportId": 0,
    "dateFrom": "",
    "dateTo": "",
    "createDate": "",
    "currency": "RUB",
    "reportType": 1,
    "rrdId": 0,
    "giId": 0,
    "dlvPrc": 0.0,
    "fixTariffDateFrom": None,
    "fixTariffDateTo": None,
    "subjectName": "",
    "nmId": 0,
    "brandName": "",
    "vendorCode": "",
    "title": "",
    "techSize": "",
    "sku": "",
    "docTypeName": "",
    "quantity": 0,
    "retailPrice": "0",
    "retailAmount": "0",
    "salePercent": 0,
    "commissionPercent": 0.0,
    "officeName": "",
    "sellerOperName": "",
    "orderDt": "",
    "saleDt": "",
    "rrDate": "",
    "shkId": 0,
    "retailPriceWithDisc": "0",
    "deliveryAmount": 0,
    "returnAmount": 0,
    "deliveryService": "0",
    "giBoxTypeName": "",
    "productDiscountForReport": 0.0,
    "sellerPromo": 0.0,
    "spp": 0.0,
    "kvwBase": 0.0,
    "kvw": 0.0,
    "supRatingUp": 0.0,
    "isKgvpV2": 0.0,
    "ppvzSalesCommission": "0",
    "forPay": "0",
    "ppvzReward": "0",
    "acquiringFee": "0",
    "acquiringPercent": 0.0,
    "paymentProcessing": "",
    "acquiringBank": "",
    "vw": "0",
    "vwNds": "0",
    "ppvzOfficeName": "",
    "ppvzOfficeId": 0,
    "ppvzSupplierName": "",
    "ppvzSupplierInn": "",
    "declarationNumber": "",
    "stickerId": "",
    "country": "Россия",
    "srvDbs": False,
    "penalty": "0",
    "additionalPayment": "0",
    "rebillLogisticCost": "0",
    "paidStorage": "0",
    "deduction": "0",
    "paidAcceptance": "0",
    "orderId": 0,
    "isB2b": False,
    "trbxId": "",
    "installmentCofinancingAmount": "0",
    "wibesDiscountPercent": 0.0,
    "cashbackAmount": "0",
    "cashbackDiscount": "0",
    "cashbackCommissionChange": "0",
    "paymentSchedule": "0",
    "deliveryMethod": "FBW",
    "sellerPromoId": 0,
    "sellerPromoDiscount": 0.0,
    "loyaltyId": 0,
    "loyaltyDiscount": 0.0,
    "uuidPromocode": "",
    "salePricePromocodeDiscountPrc": 0.0,
    "articleSubstitution": "",
    "salePriceAffiliatedDiscountPrc": 0.0,
    "salePriceWholesaleDiscountPrc": 0.0,
    "b2bCustomerTin": "",
    "buyerTaxRegistrationReasonCode": "",
    "utdUcdNumber": "",
    "utdUcdDate": None,
    "paidWithSocialCertificate": False,
    "warehouseLogisticsCoeff": 0.0,
    "orderUid": "",
    "srid": "",
}

_B2B_EVERY = 5  # every fifth row is a sale to a business: buyer's TIN and KPP, a UTD
_FIXED_TARIFF_EVERY = 7  # every seventh row's warehouse multiplier was fixed for a week
_DOC_TYPES = [("Продажа", "Продажа"), ("Продажа", "Логистика"), ("Возврат", "Возврат")]


def _money(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".") or "0"


def finance_rows(data: SellerData) -> list[Row]:
    """The finance detailed report, rrdId ascending, rrDate within the 30 days to the anchor."""
    r = data.rng("finance")
    rrd = 1_000_000_000 + r.randrange(1_000_000)
    week_from = data.anchor - timedelta(days=data.anchor.weekday() + 7)
    out: list[Row] = []
    n = data.sizes.report_rows
    for i in range(n):
        rrd += r.randrange(1, 50)
        p = data.pick(r.randrange(10**6))
        day = data.anchor - timedelta(days=29 - (29 * i) // max(n - 1, 1))
        doc, oper = _DOC_TYPES[r.randrange(len(_DOC_TYPES))]
        price = p.price if p else 1000
        retail = price * (100 - (p.discount if p else 0)) / 100
        row = dict(_FINANCE_DEFAULTS)
        row.update(
            {
                "reportId": 300_000_000 + (data.anchor - day).days // 7,
                "dateFrom": week_from.isoformat(),
                "dateTo": (week_from + timedelta(6)).isoformat(),
                "createDate": data.anchor.isoformat(),
                "rrdId": rrd,
                "giId": 100000 + i,
                "subjectName": p.subject_name if p else "",
                "nmId": p.nm_id if p else 0,
                "brandName": p.brand if p else "",
                "vendorCode": p.vendor_code if p else "",
                "title": p.title if p else "",
                "techSize": p.sizes[0].tech_size if p else "0",
                "sku": p.sizes[0].barcode if p else "",
                "docTypeName": doc,
                "sellerOperName": oper,
                "quantity": 1,
                "retailPrice": _money(price),
                "retailAmount": _money(retail),
                "retailPriceWithDisc": _money(retail),
                "forPay": _money(retail * 0.76),
                "ppvzSalesCommission": _money(retail * 0.24),
                "commissionPercent": 24.0,
                "officeName": WAREHOUSES[i % len(WAREHOUSES)][1],
                "orderDt": f"{(day - timedelta(days=2)).isoformat()}T00:00:00Z",
                "saleDt": f"{day.isoformat()}T00:00:00Z",
                "rrDate": day.isoformat(),
                "shkId": 1_200_000_000 + rrd % 10**8,
                "orderId": 2_800_000_000 + i,
                "srid": f"{data.seller_id[:8]}{rrd:x}",
                "orderUid": f"id{data.seller_id[:6]}{i:06d}",
            }
        )
        row.update(_b2b(i, rrd, day) | _fixed_tariff(i, day))
        out.append(row)
    return out


def _b2b(i: int, rrd: int, day: date) -> dict[str, Any]:
    """A business buyer's fields, on every ``_B2B_EVERY``-th row (no random draw: the other
    fields stay as they were)."""
    if i % _B2B_EVERY != _B2B_EVERY - 1:
        return {}
    return {
        "isB2b": True,
        "b2bCustomerTin": "7707083893",
        "buyerTaxRegistrationReasonCode": "773601001",
        "utdUcdNumber": f"UTD-{rrd}",
        "utdUcdDate": day.isoformat(),
    }


def _fixed_tariff(i: int, day: date) -> dict[str, Any]:
    """The dates a warehouse multiplier was fixed, on every ``_FIXED_TARIFF_EVERY``-th row."""
    if i % _FIXED_TARIFF_EVERY != 3:
        return {}
    return {
        "fixTariffDateFrom": (day - timedelta(days=7)).isoformat(),
        "fixTariffDateTo": day.isoformat(),
    }


def _moscow(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S")


def _stat_rows(data: SellerData, kind: str, n: int) -> list[Row]:
    r = data.rng(kind)
    start = datetime(data.anchor.year, data.anchor.month, data.anchor.day) - timedelta(days=30)
    out: list[Row] = []
    changed = start
    for i in range(n):
        p = data.pick(r.randrange(10**6))
        # WB refreshes statistics in batches: ``batch`` rows share one lastChangeDate, so a
        # page boundary can fall inside a batch. Never on a whole minute.
        if i % data.sizes.batch == 0:
            step = i // data.sizes.batch
            changed = start + timedelta(minutes=47 * step, seconds=1 + r.randrange(58))
        size = p.sizes[0] if p else None
        region, oblast = REGIONS[r.randrange(len(REGIONS))]
        price = float(p.price if p else 1000)
        discount = p.discount if p else 0
        with_disc = round(price * (100 - discount) / 100, 2)
        out.append(
            {
                "date": _moscow(changed - timedelta(hours=r.randrange(1, 48))),
                "lastChangeDate": _moscow(changed),
                "warehouseName": WAREHOUSES[r.randrange(len(WAREHOUSES))][1],
                "warehouseType": "Склад WB",
                "countryName": "Россия",
                "oblastOkrugName": f"{region} федеральный округ",
                "regionName": oblast,
                "supplierArticle": p.vendor_code if p else "",
                "nmId": p.nm_id if p else 0,
                "barcode": size.barcode if size else "",
                "category": "Одежда",
                "subject": p.subject_name if p else "",
                "brand": p.brand if p else "",
                "techSize": size.tech_size if size else "0",
                "incomeID": 20_000_000 + i,
                "isSupply": False,
                "isRealization": True,
                "totalPrice": price,
                "discountPercent": discount,
                "spp": 25.0,
                "finishedPrice": round(with_disc * 0.75, 2),
                "priceWithDisc": with_disc,
                "sticker": str(30_000_000_000 + i),
                "gNumber": f"{r.getrandbits(60):x}",
                "srid": f"{kind[0]}.{data.seller_id[:8]}.{i}",
            }
        )
    return out


def orders(data: SellerData) -> list[Row]:
    """Statistics orders, lastChangeDate ascending."""
    rows = _stat_rows(data, "orders", data.sizes.orders)
    for i, row in enumerate(rows):
        cancelled = i % 7 == 3
        row["isCancel"] = cancelled
        row["cancelDate"] = row["lastChangeDate"] if cancelled else "0001-01-01T00:00:00"
    return rows


def sales(data: SellerData) -> list[Row]:
    """Statistics sales and returns, lastChangeDate ascending."""
    rows = _stat_rows(data, "sales", data.sizes.sales)
    for i, row in enumerate(rows):
        is_return = i % 9 == 4
        row["saleID"] = f"{'R' if is_return else 'S'}{9_000_000_000 + i}"
        row["forPay"] = round(row["priceWithDisc"] * 0.76, 2) * (-1 if is_return else 1)
        row["paymentSaleAmount"] = 0
    return rows
