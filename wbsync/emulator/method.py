"""A WB method as WB's documents state it, and the tables every emulated method is registered in.

The built-in methods are declared one WB section per module under ``wbsync.emulator.methods``
(registered by ``wbsync.emulator.wbdocs``), a plugin's through ``wbsync.emulator.extend``; both
with the types below. Each module transcribes WB's OpenAPI documents (dev.wildberries.ru: each
operation's ``x-wb-rate-limits`` and ``x-category``, the token types of its key-icon section)
and the API information page (hosts and their ``-sandbox`` twins, token categories), written
independently of the client's table (``wbsync.wb.endpoints``); ``tests/wb/test_wb_tables.py``
compares the two, so a wrong number on either side fails a test.

Reading rules, from WB's "Rate limits" section:

* A method's table has one row per token type; "Base with secret" and Service share Personal's
  row here (:func:`rates`). A table without token types applies to every type.
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

from wbsync.catalog.registry import Claim, Table
from wbsync.emulator.tokens import Kind, category_bit

__all__ = [
    "HOUR",
    "METHODS",
    "MINUTE",
    "ROUTES",
    "SANDBOX_HOSTS",
    "SECOND",
    "Method",
    "Rate",
    "disabled_in_docs",
    "rates",
]

METHODS: Table[Method] = Table("emulated method")
"""Every emulated method by name (the names the emulator's counters and faults use)."""

ROUTES: Table[str] = Table("emulated route")
"""The method each (verb, host, path) is served by: two methods on one route would leave one
never answering, so a second is refused at registration."""

SECOND, MINUTE, HOUR = 1.0, 60.0, 3600.0

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

    def __post_init__(self) -> None:
        if not self.group:
            object.__setattr__(self, "group", self.name)
        # A category no token can carry would fail every request to the method (and `wbsync
        # emulator token`), so a misspelt one is refused where it is written.
        if self.category is not None:
            try:
                category_bit(self.category)
            except ValueError as exc:
                raise ValueError(f"emulated method {self.name!r}: {exc}") from None

    def rate(self, kind: Kind) -> Rate | None:
        """The documented limit for ``kind``; None when that token type may not call it."""
        return self.rates.get(kind)

    def claims(self) -> Iterator[Claim]:
        """The method's name, and the route it answers on."""
        yield Claim(METHODS, self.name, self)
        yield Claim(ROUTES, f"{self.verb} {self.host} {self.path}", self.name)


def rates(personal: Rate, base: Rate | None) -> dict[Kind, Rate]:
    """A method's limits as most of WB's tables give them: Personal's row for Service and Test
    too, Base's own row (None: Base tokens may not call it)."""
    rows = {Kind.PERSONAL: personal, Kind.SERVICE: personal, Kind.TEST: personal}
    if base is not None:
        rows[Kind.BASE] = base
    return rows


def disabled_in_docs() -> frozenset[str]:
    """The methods WB's documents mark temporarily disabled: off in the emulator unless asked."""
    return frozenset(n for n, m in METHODS.items() if m.disabled_in_docs)
