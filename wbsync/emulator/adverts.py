"""Deterministic advert rows of one seller: campaigns, their items' search clusters, full stats.

The finance and statistics reports are ``wbsync.emulator.reports``'.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta

from wbsync.emulator.dataset import Row, SellerData

__all__ = [
    "NO_COMPANIES",
    "STATS_STATUSES",
    "advert_stats",
    "campaigns",
    "clusters",
    "has_stats",
    "stats_days",
]

_STATUSES = [9, 9, 11, 7, 4, 8, -1]
#: Every (bid type, payment type) WB documents, in turn: only custom-bid CPM campaigns accept
#: set-bids.
_KINDS = [("manual", "cpm"), ("unified", "cpc"), ("manual", "cpc"), ("unified", "cpm")]
#: Every fifth campaign has no items: WB answers ``nm_settings: null`` (the field is nullable).
_EMPTY_EVERY = 5


def campaigns(data: SellerData) -> list[Row]:
    """Advert campaigns, id ascending, each with up to 3 of the seller's items (or none:
    ``nm_settings`` null), of every bid and payment type."""
    r = data.rng("campaigns")
    base = 20_000_000 + r.randrange(1_000_000)
    out: list[Row] = []
    for i in range(data.sizes.campaigns):
        picks = sorted(
            {p.nm_id: p for p in (data.pick(r.randrange(10**6)) for _ in range(3)) if p}.values(),
            key=lambda p: p.nm_id,
        )
        bid_type, payment_type = _KINDS[i % len(_KINDS)]
        items = [
            {
                "nm_id": p.nm_id,
                "subject": {"id": p.subject_id, "name": p.subject_name},
                "bids_kopecks": {"search": 25000 + 100 * i, "recommendations": 0},
            }
            for p in picks
        ]
        anchor = datetime(data.anchor.year, data.anchor.month, data.anchor.day)
        created = anchor - timedelta(days=40 - i)
        status = _STATUSES[i % len(_STATUSES)]
        out.append(
            {
                "id": base + 7 * i,
                "bid_type": bid_type,
                "currency": "RUB",
                "nm_settings": None if i % _EMPTY_EVERY == _EMPTY_EVERY - 1 else items,
                "restrictions": {},
                "settings": {
                    "name": f"Кампания {i}",
                    "payment_type": payment_type,
                    "placements": {"search": True, "recommendations": bid_type == "unified"},
                },
                "status": status,
                "timestamps": {
                    "created": f"{created.isoformat()}+03:00",
                    "updated": f"{_updated(status, created, anchor).isoformat()}+03:00",
                    "started": f"{(created + timedelta(days=1)).isoformat()}+03:00",
                    "deleted": "2100-01-01T00:00:00+03:00",
                },
            }
        )
    return out


def _updated(status: int, created: datetime, anchor: datetime) -> datetime:
    # A paused campaign stopped two days ago (stats until then), a finished one long ago (none
    # in a week's window); the others were last touched as they started.
    if status == _PAUSED:
        return anchor - timedelta(days=2, hours=-12)
    if status == _FINISHED:
        return created + timedelta(days=3)
    return created + timedelta(days=1)


def clusters(advert_id: int, nm_id: int) -> list[str]:
    """The search clusters (norm queries) of an item in a campaign."""
    words = ["кроссовки", "футболка", "рюкзак", "кружка", "подарок", "спорт"]
    k = (advert_id + nm_id) % len(words)
    return [words[k], f"{words[k]} мужские", f"купить {words[(k + 1) % len(words)]}"]


#: WB serves statistics of campaigns in these statuses only: finished, active, paused.
STATS_STATUSES = frozenset({7, 9, 11})
_FINISHED, _PAUSED = 7, 11
#: fullstats' 400 when none of the ids has statistics in the window (WB's words and shape).
NO_COMPANIES = "there are no companies with correct intervals"


def _day(stamp: str | None) -> date | None:
    # WB's campaign timestamps carry Moscow's offset: their date is WB's day.
    return datetime.fromisoformat(stamp).date() if stamp else None


def stats_days(data: SellerData, campaign: Row) -> list[date]:
    """The history days a campaign has statistics for: from its start to its end, which is its
    last update when it is paused or finished (the emulator's rule: pausing or finishing is its
    last change), else its deletion; none outside ``STATS_STATUSES``."""
    stamps = campaign["timestamps"]
    first = _day(stamps.get("started"))
    if campaign["status"] not in STATS_STATUSES or first is None:
        return []
    stopped = campaign["status"] in (_FINISHED, _PAUSED)
    last = _day(stamps["updated"] if stopped else stamps["deleted"])
    return [d for d in data.history_days if first <= d and (last is None or d <= last)]


def has_stats(data: SellerData, campaign: Row, begin: date, end: date) -> bool:
    """True when the campaign has statistics on a day of [begin, end]."""
    return any(begin <= d <= end for d in stats_days(data, campaign))


def advert_stats(data: SellerData, campaign: Row, begin: date, end: date) -> Row:
    """Full stats of one campaign over [begin, end] ∩ the days it has statistics for."""
    days = [d for d in stats_days(data, campaign) if begin <= d <= end]
    day_rows = [_stats_day(data, campaign, d) for d in days]
    total = _sum_metrics(day_rows)
    booster = [
        {"date": d.isoformat(), "nm": nm["nm_id"], "avg_position": 1 + (d.day + i) % 20}
        for d in days
        for i, nm in enumerate(campaign["nm_settings"] or [])
    ]
    return {
        "advertId": campaign["id"],
        **total,
        "currency": "RUB",
        "days": day_rows,
        "boosterStats": booster,
    }


_METRICS = ("views", "clicks", "atbs", "orders", "shks", "canceled", "sum", "sum_price")


def _metrics(r_views: int, r_clicks: int, price: int) -> Row:
    orders = r_clicks // 10
    return {
        "views": r_views,
        "clicks": r_clicks,
        "atbs": r_clicks // 4,
        "orders": orders,
        "shks": orders,
        "canceled": orders // 5,
        "sum": round(r_clicks * 7.5, 2),
        "sum_price": float(orders * price),
    }


def _rates(m: Row) -> Row:
    m["ctr"] = round(100 * m["clicks"] / m["views"], 2) if m["views"] else 0.0
    m["cpc"] = round(m["sum"] / m["clicks"], 2) if m["clicks"] else 0.0
    m["cr"] = round(100 * m["orders"] / m["clicks"], 2) if m["clicks"] else 0.0
    return m


def _sum_metrics(rows: list[Row]) -> Row:
    total = {k: sum(row[k] for row in rows) for k in _METRICS}
    total["sum"] = round(total["sum"], 2)
    total["sum_price"] = round(total["sum_price"], 2)
    return _rates(total)


def _stats_day(data: SellerData, campaign: Row, day: date) -> Row:
    r = data.rng(f"stats:{campaign['id']}:{day.isoformat()}")
    nms = []
    for nm in campaign["nm_settings"] or []:
        p = data.product(nm["nm_id"])
        views = r.randrange(100, 5000)
        m = _rates(_metrics(views, r.randrange(0, views // 10 + 1), p.price if p else 1000))
        nms.append({**m, "nmId": nm["nm_id"], "name": p.title if p else ""})
    app = {**_sum_metrics(nms), "appType": 1, "nms": nms}
    return {**_sum_metrics([app]), "date": f"{day.isoformat()}T00:00:00Z", "apps": [app]}
