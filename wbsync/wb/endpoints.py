"""The WB methods wbsync calls: where they live, which budget they spend, what they require.

Limits are WB's published numbers (dev.wildberries.ru, August 2026), raw (unscaled): the limiter
and the emulator apply the time scale themselves. Per token type:

* Personal and Service tokens (and Base with secret) share the generous table.
* Test tokens get the Personal numbers: WB publishes no Test row for these methods.
* Base tokens get WB's small Base row; ``None`` where WB does not allow Base tokens (the stocks
  report lists Personal, Service and Base-with-secret only). The content cards list publishes
  one table without token types, which per WB's rules applies to every token type.
* A method whose key-icon list names only Personal and Service tokens (the v1 bids method)
  takes no other type: ``None`` for Test and Base.

Methods sharing one budget share a ``group`` (all of Prices and Discounts is one); every other
method is its own group, named after the method.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal

from wbsync.catalog.registry import BUILTIN, Claim, Registrar, Table
from wbsync.errors import TokenError, WbApiError
from wbsync.values.limit_overrides import ALL_TOKEN_TYPES, LimitOverride
from wbsync.values.scope import Limit
from wbsync.wb.options import Hosts
from wbsync.wb.tokens import Category, TokenType, WbToken

__all__ = [
    "ANALYTICS",
    "ANALYTICS_SALES_FUNNEL_HISTORY",
    "ANALYTICS_STOCKS_WB_WAREHOUSES",
    "CONTENT",
    "CONTENT_CARDS_LIST",
    "ENDPOINTS",
    "FINANCE",
    "FINANCE_DETAILED_REPORT",
    "FULLSTATS_NO_COMPANIES",
    "GROUPS",
    "PRICES",
    "PRICES_GOODS_LIST",
    "PRICES_UPLOAD_TASK",
    "PROMOTION",
    "PROMOTION_ADVERTS",
    "PROMOTION_FULLSTATS",
    "PROMOTION_GET_BIDS",
    "PROMOTION_SET_BIDS",
    "PROMOTION_SET_BIDS_V1",
    "SECTIONS",
    "STATISTICS",
    "STATISTICS_ORDERS",
    "STATISTICS_SALES",
    "TARIFFS",
    "TARIFFS_ACCEPTANCE_COEFFICIENTS",
    "TARIFFS_SELLER_INFO",
    "Endpoint",
    "NoData",
    "Section",
    "TypeLimits",
    "base_url",
    "base_url_setting",
    "check_token",
    "endpoint",
    "group_token_types",
    "ping",
]

SECTIONS: Table[Section] = Table("WB section")
"""Every registered WB section (host), by name."""

ENDPOINTS: Table[Endpoint] = Table("WB method")
"""Every registered WB method, by name (e.g. ``"finance.detailed_report"``)."""

GROUPS: Table[TypeLimits] = Table("limit group")
"""Every limit group (one shared budget per seller) and its limits per token type."""


@dataclass(frozen=True, slots=True)
class Section:
    """A WB API section: its own host ``https://<host_prefix>.wildberries.ru`` (and its own base
    URL setting, ``WBSYNC_WB_BASE_URLS[name]``); ``sandbox`` when WB runs a ``-sandbox`` twin
    host (WB's /ping table), the only place Test tokens work; ``category`` is the token
    category its host wants (None: any category, as common-api, or not said). The category
    takes no part in equality: a plugin that declares a built-in section again without it
    declares the same section."""

    name: str
    host_prefix: str
    sandbox: bool = False
    category: Category | None = field(default=None, compare=False)

    def claims(self) -> Iterator[Claim]:
        """The section's name."""
        yield Claim(SECTIONS, self.name, self)


FINANCE = Section("finance", "finance-api", category=Category.FINANCE)
STATISTICS = Section("statistics", "statistics-api", sandbox=True, category=Category.STATISTICS)
PROMOTION = Section("promotion", "advert-api", sandbox=True, category=Category.PROMOTION)
ANALYTICS = Section("analytics", "seller-analytics-api", category=Category.ANALYTICS)
CONTENT = Section("content", "content-api", sandbox=True, category=Category.CONTENT)
PRICES = Section("prices", "discounts-prices-api", sandbox=True, category=Category.PRICES)
#: common-api: "Rates, News, Get Seller Information", a token of any category.
TARIFFS = Section("tariffs", "common-api")


@dataclass(frozen=True, slots=True)
class TypeLimits:
    """One method's limit per token type; ``None`` means that token type may not call it."""

    personal: Limit
    service: Limit
    test: Limit | None
    base: Limit | None

    def get(self, token_type: TokenType) -> Limit | None:
        """The limit for ``token_type``, or None if that type is not allowed."""
        limit: Limit | None = getattr(self, token_type.value)
        return limit

    @classmethod
    def same(cls, limit: Limit, *, base: Limit | None) -> TypeLimits:
        """``limit`` for Personal, Service and Test tokens (WB's usual table), ``base`` for Base
        tokens (None: WB refuses them)."""
        return cls(personal=limit, service=limit, test=limit, base=base)


def _limits(period_s: float, limit: int, burst: int, base: Limit | None) -> TypeLimits:
    return TypeLimits.same(Limit(period_s=period_s, limit=limit, burst=burst), base=base)


_MIN = 60.0
_HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class NoData:
    """A refusal of WB's that means "nothing to return", not "you asked wrongly": known by its
    status and WB's words in it (matched in any case, anywhere in what WB said)."""

    status: int
    words: str

    def matches(self, error: WbApiError) -> bool:
        """True when ``error`` is this refusal."""
        said = (error.words or "").casefold()
        return error.status == self.status and self.words.casefold() in said


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One WB method: its name, where it is, its budget group, category and limits.

    ``group`` names the budget the method spends (WB counts some methods together: all of
    Prices and Discounts is one); methods in one group must declare the same limits.
    ``no_data``: the refusals WB gives for "nothing to return" (docs/design.md, "No data is not
    a failure"); the client answers them as an empty reply, every other 4xx is an error.
    ``probe``: a check of the token itself (``/ping``, seller info): sent whatever the token's
    claims say of its expiry and categories, since WB's answer is the point, and naming its WB
    host in the ``Host`` header, since ``/ping`` has one path on every host and one base URL
    (the emulator, a proxy) may serve them all.
    """

    name: str
    section: Section
    method: Literal["GET", "POST"]
    path: str
    group: str
    category: Category | None
    limits: TypeLimits
    writes: bool = False
    no_data: tuple[NoData, ...] = ()
    probe: bool = False

    @property
    def host_prefix(self) -> str:
        """The production host's first label, e.g. ``finance-api``."""
        return self.section.host_prefix

    def claims(self) -> Iterator[Claim]:
        """The method's name, its limit group and its section."""
        yield from self.section.claims()
        yield Claim(ENDPOINTS, self.name, self)
        yield Claim(GROUPS, self.group, self.limits)

    def says_no_data(self, error: WbApiError) -> bool:
        """True when ``error`` is WB saying this method has nothing to return."""
        return any(rule.matches(error) for rule in self.no_data)

    def allows(self, token_type: TokenType) -> bool:
        """True when WB lets ``token_type`` call this method."""
        return self.limits.get(token_type) is not None

    def limit_for(
        self,
        token_type: TokenType,
        overrides: Mapping[str, Mapping[str, LimitOverride]] | None = None,
    ) -> Limit:
        """The raw limit for ``token_type``: the group's entry of ``overrides``
        (WBSYNC_LIMIT_OVERRIDES), else WB's table; ``ValueError`` if that type may not call
        this method."""
        limit = self.limits.get(token_type)
        if limit is None:
            raise ValueError(f"{self.name} does not accept {token_type.value} tokens")
        by_type = overrides.get(self.group, {}) if overrides else {}
        override = by_type.get(token_type.value) or by_type.get(ALL_TOKEN_TYPES)
        if override is None:
            return limit
        return Limit(period_s=override.period_s, limit=override.limit, burst=override.burst)

    def url(self, hosts: Hosts | None = None, *, sandbox: bool = False) -> str:
        """The full URL of this method on ``hosts`` (a sandbox one for Test tokens)."""
        return base_url(self.section, hosts, sandbox=sandbox) + self.path


def base_url(section: Section, hosts: Hosts | None = None, *, sandbox: bool = False) -> str:
    """Where ``section`` lives: ``base_urls[section]``, else ``base_url``, else WB's host.

    With ``sandbox`` (Test tokens): ``sandbox_base_url``, else WB's ``-sandbox`` host;
    ``ValueError`` for a section without one.
    """
    if sandbox:
        if not section.sandbox:
            raise ValueError(f"WB has no sandbox host for the {section.name} section")
        url = hosts.sandbox_base_url if hosts is not None else None
        return url.rstrip("/") if url else f"https://{section.host_prefix}-sandbox.wildberries.ru"
    if hosts is not None:
        url = hosts.base_urls.get(section.name) or hosts.base_url
        if url:
            return url.rstrip("/")
    return f"https://{section.host_prefix}.wildberries.ru"


def base_url_setting(section: Section, hosts: Hosts | None = None, *, sandbox: bool = False) -> str:
    """The setting that decides ``section``'s base URL (what to fix when it is wrong)."""
    per_section = f'WBSYNC_WB_BASE_URLS["{section.name}"]'
    if sandbox:
        return "WBSYNC_WB_SANDBOX_BASE_URL"
    if hosts is not None and hosts.base_urls.get(section.name):
        return per_section
    if hosts is not None and hosts.base_url:
        return f"WBSYNC_WB_BASE_URL (or {per_section} for this section alone)"
    # WB's own host: only a wrong path (a plugin's declaration, say) or a missing setting.
    return f"{per_section} (unset: WB's own host, so the method's path may be wrong)"


def check_token(token: WbToken, ep: Endpoint, *, cabinet: str | None = None) -> None:
    """Raise ``TokenError`` unless ``token`` may call ``ep``: expiry, type, category, read-only
    (a probe's expiry and category are WB's to judge)."""
    if token.expired() and not ep.probe:
        raise TokenError(
            f"WB token expired at {token.expires_at.isoformat()}; issue a new one", cabinet=cabinet
        )
    if not ep.allows(token.type):
        raise TokenError(f"{ep.name} does not accept {token.type.value} tokens", cabinet=cabinet)
    if ep.category is not None and not token.has(ep.category) and not ep.probe:
        raise TokenError(
            f"token lacks category {ep.category.label!r} needed by {ep.name}", cabinet=cabinet
        )
    if ep.writes and token.read_only:
        raise TokenError(f"token is read-only; {ep.name} writes", cabinet=cabinet)
    if token.type is TokenType.TEST and not ep.section.sandbox:
        raise TokenError(
            f"a Test token works only on WB's sandbox hosts, and the {ep.section.name} section "
            f"({ep.name}) has none; use a Personal or Service token",
            cabinet=cabinet,
        )


def _ep(
    name: str,
    section: Section,
    method: Literal["GET", "POST"],
    path: str,
    category: Category | None,
    limits: TypeLimits,
    *,
    group: str | None = None,
    writes: bool = False,
    no_data: tuple[NoData, ...] = (),
    probe: bool = False,
) -> Endpoint:
    return Endpoint(
        name, section, method, path, group or name, category, limits, writes, no_data, probe
    )


_PRICES = _limits(6.0, 10, 5, Limit(_HOUR, 4, 1))

FINANCE_DETAILED_REPORT = _ep(
    "finance.detailed_report",
    FINANCE,
    "POST",
    "/api/finance/v1/sales-reports/detailed",
    Category.FINANCE,
    _limits(_MIN, 1, 1, Limit(24 * _HOUR, 2, 1)),
)
STATISTICS_ORDERS = _ep(
    "statistics.orders",
    STATISTICS,
    "GET",
    "/api/v1/supplier/orders",
    Category.STATISTICS,
    _limits(_MIN, 1, 10, Limit(3 * _HOUR, 1, 1)),
)
STATISTICS_SALES = _ep(
    "statistics.sales",
    STATISTICS,
    "GET",
    "/api/v1/supplier/sales",
    Category.STATISTICS,
    _limits(_MIN, 1, 1, Limit(2 * _HOUR, 1, 1)),
)
PROMOTION_ADVERTS = _ep(
    "promotion.adverts",
    PROMOTION,
    "GET",
    "/api/advert/v2/adverts",
    Category.PROMOTION,
    _limits(1.0, 5, 5, Limit(_HOUR, 1, 1)),
)
#: fullstats' answer when none of the ids has statistics in the window (a paused or finished
#: campaign's, for example): 400 ``{"error": "there are no companies with correct intervals"}``.
FULLSTATS_NO_COMPANIES = NoData(400, "there are no companies with correct intervals")

PROMOTION_FULLSTATS = _ep(
    "promotion.fullstats",
    PROMOTION,
    "GET",
    "/adv/v3/fullstats",
    Category.PROMOTION,
    _limits(_MIN, 3, 1, Limit(_HOUR, 1, 1)),
    no_data=(FULLSTATS_NO_COMPANIES,),
)
PROMOTION_GET_BIDS = _ep(
    "promotion.get_bids",
    PROMOTION,
    "POST",
    "/adv/v0/normquery/get-bids",
    Category.PROMOTION,
    _limits(1.0, 5, 10, Limit(_HOUR, 5, 1)),
)
PROMOTION_SET_BIDS = _ep(
    "promotion.set_bids",
    PROMOTION,
    "POST",
    "/adv/v0/normquery/bids",
    Category.PROMOTION,
    _limits(1.0, 2, 4, Limit(_HOUR, 5, 1)),
    writes=True,
)
# Key icon: Personal and Service tokens only (no Base, no Base with secret; no Test row).
_SET_BIDS_V1 = Limit(period_s=1.0, limit=2, burst=4)
PROMOTION_SET_BIDS_V1 = _ep(
    "promotion.set_bids_v1",
    PROMOTION,
    "POST",
    "/api/advert/v1/normquery/bids",
    Category.PROMOTION,
    TypeLimits(personal=_SET_BIDS_V1, service=_SET_BIDS_V1, test=None, base=None),
    writes=True,
)
ANALYTICS_SALES_FUNNEL_HISTORY = _ep(
    "analytics.sales_funnel_history",
    ANALYTICS,
    "POST",
    "/api/analytics/v3/sales-funnel/products/history",
    Category.ANALYTICS,
    _limits(_MIN, 3, 3, Limit(_HOUR, 2, 1)),
)
ANALYTICS_STOCKS_WB_WAREHOUSES = _ep(
    "analytics.stocks_wb_warehouses",
    ANALYTICS,
    "POST",
    "/api/analytics/v1/stocks-report/wb-warehouses",
    Category.ANALYTICS,
    _limits(_MIN, 3, 1, None),
)
CONTENT_CARDS_LIST = _ep(
    "content.cards_list",
    CONTENT,
    "POST",
    "/content/v2/get/cards/list",
    Category.CONTENT,
    _limits(_MIN, 100, 5, Limit(_MIN, 100, 5)),
)
PRICES_GOODS_LIST = _ep(
    "prices.goods_list",
    PRICES,
    "GET",
    "/api/v2/list/goods/filter",
    Category.PRICES,
    _PRICES,
    group="prices",
)
PRICES_UPLOAD_TASK = _ep(
    "prices.upload_task",
    PRICES,
    "POST",
    "/api/v2/upload/task",
    Category.PRICES,
    _PRICES,
    group="prices",
    writes=True,
)
# WB: acceptance coefficients answer a token of any category.
TARIFFS_ACCEPTANCE_COEFFICIENTS = _ep(
    "tariffs.acceptance_coefficients",
    TARIFFS,
    "GET",
    "/api/tariffs/v1/acceptance/coefficients",
    None,
    _limits(_MIN, 6, 6, Limit(_HOUR, 1, 1)),
)

# WB: "Get Seller Information" answers a token of any category.
TARIFFS_SELLER_INFO = _ep(
    "tariffs.seller_info",
    TARIFFS,
    "GET",
    "/api/v1/seller-info",
    None,
    _limits(_MIN, 1, 10, Limit(24 * _HOUR, 1, 1)),
    probe=True,
)

#: WB's /ping: "a maximum of 3 requests every 30 seconds", every token type, counted "on each
#: host" (so each section's ping is its own group).
_PING = Limit(period_s=30.0, limit=3, burst=3)


def _ping(section: Section) -> Endpoint:
    return _ep(
        f"{section.name}.ping",
        section,
        "GET",
        "/ping",
        section.category,
        TypeLimits(personal=_PING, service=_PING, test=_PING, base=_PING),
        probe=True,
    )


_PINGS = tuple(
    _ping(s) for s in (FINANCE, STATISTICS, PROMOTION, ANALYTICS, CONTENT, PRICES, TARIFFS)
)

# The built-in methods, declared like a plugin's (their sections come with them).
_builtin = Registrar(BUILTIN)
_builtin.declare(
    FINANCE_DETAILED_REPORT,
    STATISTICS_ORDERS,
    STATISTICS_SALES,
    PROMOTION_ADVERTS,
    PROMOTION_FULLSTATS,
    PROMOTION_GET_BIDS,
    PROMOTION_SET_BIDS,
    PROMOTION_SET_BIDS_V1,
    ANALYTICS_SALES_FUNNEL_HISTORY,
    ANALYTICS_STOCKS_WB_WAREHOUSES,
    CONTENT_CARDS_LIST,
    PRICES_GOODS_LIST,
    PRICES_UPLOAD_TASK,
    TARIFFS_ACCEPTANCE_COEFFICIENTS,
    TARIFFS_SELLER_INFO,
    *_PINGS,
)
_builtin.commit()


def group_token_types() -> dict[str, list[TokenType]]:
    """Every limit group and the token types that may call its methods."""
    out: dict[str, list[TokenType]] = {}
    for ep in ENDPOINTS.values():
        out.setdefault(ep.group, [t for t in TokenType if ep.allows(t)])
    return dict(sorted(out.items()))


def ping(section: Section) -> Endpoint | None:
    """WB's ``/ping`` of ``section``'s host, when one is declared (``<section>.ping``)."""
    return ENDPOINTS.get(f"{section.name}.ping")


def endpoint(name: str) -> Endpoint:
    """The endpoint called ``name`` (e.g. ``"finance.detailed_report"``); ``KeyError`` if none."""
    return ENDPOINTS[name]
