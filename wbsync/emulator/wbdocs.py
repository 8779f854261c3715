"""WB's methods as WB's documents state them: the emulator's own table of paths and limits.

Transcribed from WB's OpenAPI documents (dev.wildberries.ru, fetched 2026-08-19: each operation's
``x-wb-rate-limits`` and ``x-category``, the token types of its key-icon section) and the API
information page (hosts and their ``-sandbox`` twins, token categories). Written independently
of the client's table (``wbsync.wb.endpoints``); ``tests/wb/test_wb_tables.py`` compares the
two, so a wrong number on either side fails a test.

Reading rules, from WB's "Rate limits" section:

* A method's table has one row per token type; "Base with secret" and Service share Personal's
  row here. A table without token types applies to every type.
* WB publishes no Test row: Test tokens work only on a section's sandbox host, which this table
  gives Personal's numbers.
* A type absent from a method's key-icon list (the stocks report lists Personal, Service and
  Base with secret; the v1 bids method Personal and Service) may not call it: 403. A method
  whose list leaves out Test tokens has no row for them either.
* "For all methods in the Prices and Discounts category" makes the whole section one budget.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from wbsync.catalog.registry import BUILTIN, Claim, Registrar, Table
from wbsync.emulator.tokens import Kind

__all__ = ["METHODS", "PING_HOSTS", "ROUTES", "SANDBOX_HOSTS", "Method", "Rate", "disabled_in_docs"]

METHODS: Table[Method] = Table("emulated method")
"""Every emulated method by name (the names the emulator's counters and faults use)."""

ROUTES: Table[str] = Table("emulated route")
"""The method each (verb, host, path) is served by: two methods on one route would leave one
never answering, so a second is refused at registration."""


@dataclass(frozen=True, slots=True)
class Rate:
    """One row of a method's limit table: ``limit`` requests per ``period_s``, bucket ``burst``."""

    period_s: float
    limit: int
    burst: int

    def __post_init__(self) -> None:
        if self.period_s <= 0 or self.limit < 1 or self.burst < 1:
            raise ValueError(f"a rate needs period_s > 0, limit >= 1, burst >= 1; got {self}")

    def scaled(self, factor: float) -> Rate:
        """The same rate with its period multiplied by the time scale."""
        return Rate(self.period_s * factor, self.limit, self.burst)


@dataclass(frozen=True, slots=True)
class Method:
    """One WB method as documented: where it is, which token bit it needs, its limits."""

    name: str
    verb: str
    path: str
    host: str
    category: str | None
    rates: dict[Kind, Rate]
    #: Methods sharing one budget share a group; otherwise the group is the method's name.
    group: str = ""
    writes: bool = False
    #: WB's documents mark the method "temporarily disabled" (release notes id 570).
    disabled_in_docs: bool = False
    x_category: str = field(default="", compare=False)

    def rate(self, kind: Kind) -> Rate | None:
        """The documented limit for ``kind``; None when that token type may not call it."""
        return self.rates.get(kind)

    def claims(self) -> Iterator[Claim]:
        """The method's name, and the route it answers on."""
        yield Claim(METHODS, self.name, self)
        yield Claim(ROUTES, f"{self.verb} {self.host} {self.path}", self.name)


_S, _MIN, _H = 1.0, 60.0, 3600.0

#: Hosts that have a ``-sandbox`` twin (the API information page's /ping table).
SANDBOX_HOSTS = frozenset(
    {
        "content-api",
        "discounts-prices-api",
        "statistics-api",
        "advert-api",
        "feedbacks-api",
    }
)


def _rates(personal: Rate, base: Rate | None) -> dict[Kind, Rate]:
    rows = {Kind.PERSONAL: personal, Kind.SERVICE: personal, Kind.TEST: personal}
    if base is not None:
        rows[Kind.BASE] = base
    return rows


def _m(
    name: str,
    verb: str,
    path: str,
    host: str,
    category: str | None,
    x_category: str,
    rates: dict[Kind, Rate],
    *,
    group: str | None = None,
    writes: bool = False,
    disabled_in_docs: bool = False,
) -> Method:
    return Method(
        name,
        verb,
        path,
        host,
        category,
        rates,
        group=group or name,
        writes=writes,
        disabled_in_docs=disabled_in_docs,
        x_category=x_category,
    )


_PRICES = _rates(Rate(6 * _S, 10, 5), Rate(_H, 4, 1))

_ALL = (
    _m(
        "finance.detailed_report",
        "POST",
        "/api/finance/v1/sales-reports/detailed",
        "finance-api",
        "finance",
        "finance",
        _rates(Rate(_MIN, 1, 1), Rate(24 * _H, 2, 1)),
    ),
    _m(
        "statistics.orders",
        "GET",
        "/api/v1/supplier/orders",
        "statistics-api",
        "statistics",
        "statistics",
        _rates(Rate(_MIN, 1, 10), Rate(3 * _H, 1, 1)),
    ),
    _m(
        "statistics.sales",
        "GET",
        "/api/v1/supplier/sales",
        "statistics-api",
        "statistics",
        "statistics",
        _rates(Rate(_MIN, 1, 1), Rate(2 * _H, 1, 1)),
    ),
    _m(
        "promotion.adverts",
        "GET",
        "/api/advert/v2/adverts",
        "advert-api",
        "promotion",
        "advert",
        _rates(Rate(_S, 5, 5), Rate(_H, 1, 1)),
    ),
    _m(
        "promotion.fullstats",
        "GET",
        "/adv/v3/fullstats",
        "advert-api",
        "promotion",
        "advert",
        _rates(Rate(_MIN, 3, 1), Rate(_H, 1, 1)),
    ),
    _m(
        "promotion.get_bids",
        "POST",
        "/adv/v0/normquery/get-bids",
        "advert-api",
        "promotion",
        "advert",
        _rates(Rate(_S, 5, 10), Rate(_H, 5, 1)),
    ),
    _m(
        "promotion.set_bids",
        "POST",
        "/adv/v0/normquery/bids",
        "advert-api",
        "promotion",
        "advert",
        _rates(Rate(_S, 2, 4), Rate(_H, 5, 1)),
        writes=True,
    ),
    # Key icon: Personal and Service only (no Base, no Base with secret, so no Test row).
    _m(
        "promotion.set_bids_v1",
        "POST",
        "/api/advert/v1/normquery/bids",
        "advert-api",
        "promotion",
        "advert",
        {Kind.PERSONAL: Rate(_S, 2, 4), Kind.SERVICE: Rate(_S, 2, 4)},
        writes=True,
    ),
    _m(
        "analytics.sales_funnel_history",
        "POST",
        "/api/analytics/v3/sales-funnel/products/history",
        "seller-analytics-api",
        "analytics",
        "contentanalytics",
        _rates(Rate(_MIN, 3, 3), Rate(_H, 2, 1)),
    ),
    # Key icon: Personal, Service, Base with secret. No Base row, so Base may not call it.
    _m(
        "analytics.stocks_wb_warehouses",
        "POST",
        "/api/analytics/v1/stocks-report/wb-warehouses",
        "seller-analytics-api",
        "analytics",
        "contentanalytics",
        _rates(Rate(_MIN, 3, 1), None),
    ),
    # One table without token types: every type.
    _m(
        "content.cards_list",
        "POST",
        "/content/v2/get/cards/list",
        "content-api",
        "content",
        "content",
        _rates(Rate(_MIN, 100, 5), Rate(_MIN, 100, 5)),
    ),
    _m(
        "prices.goods_list",
        "GET",
        "/api/v2/list/goods/filter",
        "discounts-prices-api",
        "prices",
        "discountsandprices",
        _PRICES,
        group="prices",
    ),
    _m(
        "prices.upload_task",
        "POST",
        "/api/v2/upload/task",
        "discounts-prices-api",
        "prices",
        "discountsandprices",
        _PRICES,
        group="prices",
        writes=True,
    ),
    # "Rates, News, Get Seller Information" answer a token of any category.
    _m(
        "tariffs.acceptance_coefficients",
        "GET",
        "/api/tariffs/v1/acceptance/coefficients",
        "common-api",
        None,
        "commonapi",
        _rates(Rate(_MIN, 6, 6), Rate(_H, 1, 1)),
        disabled_in_docs=True,
    ),
)

#: "Get Seller Information": a token of any category; Base tokens one a day.
_SELLER_INFO = _m(
    "tariffs.seller_info",
    "GET",
    "/api/v1/seller-info",
    "common-api",
    None,
    "commonapi",
    _rates(Rate(_MIN, 1, 10), Rate(24 * _H, 1, 1)),
)

#: The hosts emulated above, as WB's /ping table names their category (common-api: "Rates,
#: News, Get Seller Information", any category), and the name their methods go by here.
PING_HOSTS: dict[str, tuple[str, str | None]] = {
    "finance-api": ("finance", "finance"),
    "statistics-api": ("statistics", "statistics"),
    "advert-api": ("promotion", "promotion"),
    "seller-analytics-api": ("analytics", "analytics"),
    "content-api": ("content", "content"),
    "discounts-prices-api": ("prices", "prices"),
    "common-api": ("tariffs", None),
}

#: /ping: "a maximum of 3 requests every 30 seconds", applied "individually to each instance of
#: the method on each host"; no token types named, so every type.
_PING = Rate(30 * _S, 3, 3)


def _ping(host: str, name: str, category: str | None) -> Method:
    rates = {kind: _PING for kind in Kind}
    return _m(f"{name}.ping", "GET", "/ping", host, category, "all", rates)


_PINGS = tuple(_ping(host, name, category) for host, (name, category) in PING_HOSTS.items())

_builtin = Registrar(BUILTIN)
_builtin.declare(*_ALL, _SELLER_INFO, *_PINGS)
_builtin.commit()


def disabled_in_docs() -> frozenset[str]:
    """The methods WB's documents mark temporarily disabled: off in the emulator unless asked."""
    return frozenset(n for n, m in METHODS.items() if m.disabled_in_docs)
