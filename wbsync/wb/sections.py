"""WB's sections (hosts) the built-in syncs call, and the probes of a token on them.

Each section is its own host (and base URL setting); its ``/ping`` checks a token there, and WB's
seller information checks it anywhere (``wbsync cabinets check``, the probes that lift a
suspension). Declared with the public types (``wbsync.extend``) and registered when this module
is imported; the methods the syncs call are declared in the syncs' modules.
"""

from __future__ import annotations

from wbsync.catalog.registry import BUILTIN, Registrar
from wbsync.values.scope import Limit
from wbsync.wb.endpoints import Endpoint, Section, TypeLimits
from wbsync.wb.tokens import Category

__all__ = [
    "ANALYTICS",
    "CONTENT",
    "FINANCE",
    "PINGS",
    "PRICES",
    "PRICES_LIMITS",
    "PROMOTION",
    "STATISTICS",
    "TARIFFS",
    "TARIFFS_SELLER_INFO",
]

FINANCE = Section("finance", "finance-api", category=Category.FINANCE)
STATISTICS = Section("statistics", "statistics-api", sandbox=True, category=Category.STATISTICS)
PROMOTION = Section("promotion", "advert-api", sandbox=True, category=Category.PROMOTION)
ANALYTICS = Section("analytics", "seller-analytics-api", category=Category.ANALYTICS)
CONTENT = Section("content", "content-api", sandbox=True, category=Category.CONTENT)
PRICES = Section("prices", "discounts-prices-api", sandbox=True, category=Category.PRICES)
#: Prices and Discounts counts every one of its methods in one budget (group ``"prices"``).
PRICES_LIMITS = TypeLimits.same(Limit(6.0, 10, 5), base=Limit(3600.0, 4, 1))
#: common-api: "Rates, News, Get Seller Information", a token of any category.
TARIFFS = Section("tariffs", "common-api")

# WB: "Get Seller Information" answers a token of any category.
TARIFFS_SELLER_INFO = Endpoint(
    name="tariffs.seller_info",
    section=TARIFFS,
    method="GET",
    path="/api/v1/seller-info",
    group="tariffs.seller_info",
    category=None,
    limits=TypeLimits.same(Limit(60.0, 1, 10), base=Limit(24 * 3600.0, 1, 1)),
    probe=True,
)

#: WB's /ping: "a maximum of 3 requests every 30 seconds", every token type, counted "on each
#: host" (so each section's ping is its own group).
_PING = Limit(period_s=30.0, limit=3, burst=3)


def _ping(section: Section) -> Endpoint:
    return Endpoint(
        name=f"{section.name}.ping",
        section=section,
        method="GET",
        path="/ping",
        group=f"{section.name}.ping",
        category=section.category,
        limits=TypeLimits(personal=_PING, service=_PING, test=_PING, base=_PING),
        probe=True,
    )


PINGS = tuple(
    _ping(s) for s in (FINANCE, STATISTICS, PROMOTION, ANALYTICS, CONTENT, PRICES, TARIFFS)
)
"""Each section's ``/ping`` (``<section>.ping``)."""

_builtin = Registrar(BUILTIN)
_builtin.declare(*PINGS, TARIFFS_SELLER_INFO)
_builtin.commit()
