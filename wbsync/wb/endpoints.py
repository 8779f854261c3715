"""What a WB method is: where it lives, which budget it spends, what it requires.

The types every declaration uses (:class:`Section`, :class:`Endpoint` with its
:class:`TypeLimits` and :class:`NoData` refusals), the registry's tables of them, the base URLs
and the token checks. The methods themselves are declared where they are called: each built-in
sync's module declares its own (``wbsync/syncs/<name>.py``), methods more than one caller shares
are in ``wb/methods.py``, WB's sections and their probes (``/ping``, seller info) in
``wb/sections.py``, and a plugin's in its own module (``wbsync.extend``).

Limits are WB's published numbers, raw (unscaled): the limiter and the emulator apply the time
scale themselves. Per token type, as WB's tables give them:

* Personal and Service tokens (and Base with secret) share the generous table.
* Test tokens get the Personal numbers where WB publishes no Test row.
* Base tokens get WB's small Base row; ``None`` where WB does not allow Base tokens. A method
  WB publishes one table for without token types has it for every token type.
* A method whose key-icon list names only Personal and Service tokens takes no other type:
  ``None`` for Test and Base.

Methods sharing one budget share a ``group`` (all of Prices and Discounts is one); every other
method is its own group, named after the method.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal, get_args

from wbsync.catalog.registry import Claim, Table
from wbsync.errors import TokenError, WbApiError
from wbsync.values.limit_overrides import ALL_TOKEN_TYPES, LimitOverride
from wbsync.values.scope import Limit
from wbsync.wb.options import Hosts
from wbsync.wb.tokens import Category, TokenType, WbToken

__all__ = [
    "ENDPOINTS",
    "GROUPS",
    "REPLY_KINDS",
    "SECTIONS",
    "Endpoint",
    "NoData",
    "ReplyKind",
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

ReplyKind = Literal["json", "zip-csv"]
"""What a method's successful reply body is: JSON (WB's usual), or a ZIP archive holding one CSV
file (``wb/zipcsv.py``: read into rows of text, bounded)."""
REPLY_KINDS: tuple[ReplyKind, ...] = get_args(ReplyKind)


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
    ``reply``: what a successful reply's body is (:data:`ReplyKind`): ``"json"``, parsed into
    ``WbReply.data``, or ``"zip-csv"``, a ZIP archive of one CSV file whose rows (dicts of the
    header's names to the cells' text) are ``WbReply.data``.
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
    reply: ReplyKind = "json"

    def __post_init__(self) -> None:
        # Refused here, so a plugin declaring one is refused when it loads.
        if self.reply not in REPLY_KINDS:
            raise ValueError(
                f"{self.name}: reply must be one of {', '.join(REPLY_KINDS)}, got {self.reply!r}"
            )

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
