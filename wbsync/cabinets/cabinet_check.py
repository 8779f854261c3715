"""A day-one check of a cabinet's token against WB itself, through the shared buckets.

For every WB section the syncs use, WB's ``GET /ping`` on that section's host (one a host: is it
reachable, does WB take the token there), and ``GET /api/v1/seller-info`` once (whose token is
it: WB's ``sid`` against the seller the cabinet claims). Both are endpoints of the client's table
with WB's limits (``wbsync.wb.endpoints``): every request takes its token from the shared
limiter like any sync's, so checking a thousand cabinets at once stays within WB's ``/ping``
limit. The token's claims add what needs no request: its type, the limits that type gets, its
category per section and its expiry.

A section is ``ok`` (WB answered 200), ``refused`` (WB said no, or the client would not send:
its words say why), ``unreachable`` (no usable answer: transport, 5xx, a wrong base URL) or
``unchecked`` (the shared bucket would make it wait past the limiter's ceiling, or WB kept
answering 429). The seller is ``confirmed``, ``mismatch``, or one of the section statuses. A
check is good only when every section is ``ok`` and the seller ``confirmed``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from wbsync.errors import (
    RateLimitExceeded,
    TokenError,
    WbApiError,
    WbBadResponseError,
    WbMethodDisabledError,
    WbPathNotFoundError,
    WbRateLimitedError,
    WbServerError,
    WbTransportError,
)
from wbsync.shared.runtime import Runtime
from wbsync.store import Cabinet
from wbsync.syncs import SYNCS
from wbsync.system import clock
from wbsync.wb import endpoints as eps
from wbsync.wb.client import WbClient
from wbsync.wb.sections import TARIFFS_SELLER_INFO
from wbsync.wb.tokens import WbToken, parse_token

__all__ = [
    "CHECK_CONCURRENCY",
    "EXPIRY_WARNING_DAYS",
    "CabinetCheck",
    "SectionCheck",
    "SellerCheck",
    "check_cabinet",
    "check_many",
    "check_new_token",
    "check_token",
    "used_sections",
]

EXPIRY_WARNING_DAYS = 14
"""A token that expires within this many days is reported with a warning."""

CHECK_CONCURRENCY = 32
"""Cabinets checked at once by ``check_many``; the shared buckets pace their requests anyway,
this only bounds the open connections and tasks."""

_DAY_S = 86400.0
# A 404 on a probe (path not found, or switched off) says nothing of the token.
_UNREACHABLE = (
    WbTransportError,
    WbServerError,
    WbBadResponseError,
    WbPathNotFoundError,
    WbMethodDisabledError,
)
_UNCHECKED = (WbRateLimitedError, RateLimitExceeded)


@dataclass(frozen=True, slots=True)
class SectionCheck:
    """One section's answer: WB's ``/ping`` on its host with the cabinet's token."""

    section: str
    host: str
    category: str | None
    granted: bool
    status: str
    words: str | None
    http_status: int | None
    limits: dict[str, dict[str, float] | None]

    @property
    def ok(self) -> bool:
        """WB took the token on this host."""
        return self.status == "ok"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "section": self.section,
            "host": self.host,
            "status": self.status,
            "reachable": self.status in ("ok", "refused") and self.http_status is not None,
            "accepted": None if self.status in ("unreachable", "unchecked") else self.ok,
            "category": self.category,
            "category_granted": self.granted,
            "http_status": self.http_status,
            "words": self.words,
            "limits": self.limits,
        }


@dataclass(frozen=True, slots=True)
class SellerCheck:
    """WB's seller information against the seller the cabinet claims."""

    status: str
    claimed: str
    sid: str | None = None
    name: str | None = None
    words: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "status": self.status,
            "claimed_seller_id": self.claimed,
            "seller_id": self.sid,
            "name": self.name,
            "words": self.words,
        }


@dataclass(frozen=True, slots=True)
class CabinetCheck:
    """The whole check of one cabinet's token."""

    cabinet_id: int | None
    name: str
    token_type: str
    expires_at: datetime
    checked_at: datetime
    sections: tuple[SectionCheck, ...]
    seller: SellerCheck

    @property
    def ok(self) -> bool:
        """Every section took the token and it is the claimed seller's."""
        return all(s.ok for s in self.sections) and self.seller.status == "confirmed"

    @property
    def expires_in_days(self) -> int:
        """Whole days until the token expires (negative: whole days since it expired)."""
        return int((self.expires_at - self.checked_at).total_seconds() / _DAY_S)

    @property
    def expired(self) -> bool:
        """The token's ``exp`` has passed."""
        return self.expires_at <= self.checked_at

    @property
    def expiring_soon(self) -> bool:
        """Within ``EXPIRY_WARNING_DAYS`` of expiry, or past it."""
        return self.expires_in_days < EXPIRY_WARNING_DAYS or self.expired

    @property
    def refused(self) -> bool:
        """WB (or the client, before sending) said no somewhere, or the token is another
        seller's."""
        said_no = any(s.status == "refused" for s in self.sections)
        return said_no or self.seller.status in ("refused", "mismatch")

    def why_not(self) -> str | None:
        """What is wrong, in WB's words where it said any; None when the check is good."""
        if self.ok:
            return None
        parts = []
        if self.seller.status != "confirmed":
            parts.append(f"seller {self.seller.status}: {self.seller.words or 'no answer'}")
        for s in self.sections:
            if not s.ok:
                parts.append(f"{s.section} {s.status}: {s.words or 'no answer'}")
        return "; ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (docs/cli.md, "cabinets check")."""
        return {
            "cabinet": {"id": self.cabinet_id, "name": self.name},
            "ok": self.ok,
            "token": {
                "type": self.token_type,
                "expires_at": self.expires_at.isoformat(),
                "expires_in_days": self.expires_in_days,
                "expired": self.expired,
                "expiring_soon": self.expiring_soon,
            },
            "seller": self.seller.as_dict(),
            "sections": [s.as_dict() for s in self.sections],
        }


def used_sections() -> list[eps.Section]:
    """The sections the registered syncs call, in the syncs' order, as registered (a plugin's
    endpoint may name a built-in section of its own making)."""
    seen: dict[str, eps.Section] = {}
    for sync in SYNCS.values():
        for ep in sync.calls:
            seen.setdefault(ep.section.name, eps.SECTIONS[ep.section.name])
    return list(seen.values())


def _limits(client: WbClient, section: eps.Section) -> dict[str, dict[str, float] | None]:
    """The limit each of the syncs' methods in ``section`` gets for the token's type."""
    out: dict[str, dict[str, float] | None] = {}
    for sync in SYNCS.values():
        for ep in sync.calls:
            if ep.section.name == section.name and ep.name not in out:
                out[ep.name] = _limit(client, ep)
    return out


def _limit(client: WbClient, ep: eps.Endpoint) -> dict[str, float] | None:
    if not ep.allows(client.token.type):
        return None
    limit = client.scope(ep).limit
    return {"period_s": limit.period_s, "limit": limit.limit, "burst": limit.burst}


async def _ask(client: WbClient, ep: eps.Endpoint) -> tuple[str, int | None, str | None, Any]:
    """(status, WB's HTTP status, words, reply data) of one probe."""
    try:
        reply = await client.call(ep)
    except TokenError as exc:
        return "refused", None, str(exc), None
    except _UNCHECKED as exc:
        return "unchecked", getattr(exc, "status", None), str(exc), None
    except _UNREACHABLE as exc:
        return "unreachable", exc.status, exc.words or str(exc), None
    except WbApiError as exc:
        return "refused", exc.status, exc.words or str(exc), None
    return "ok", reply.status, None, reply.data


async def _section(client: WbClient, section: eps.Section) -> SectionCheck:
    ping = eps.ping(section)
    category = section.category
    granted = category is None or client.token.has(category)
    words: str | None = f"no /ping declared for {section.name}"
    status, code = "unchecked", None
    if ping is not None:
        status, code, words, _ = await _ask(client, ping)
    return SectionCheck(
        section=section.name,
        host=section.host_prefix,
        category=None if category is None else category.label,
        granted=granted,
        status=status,
        words=words,
        http_status=code,
        limits=_limits(client, section),
    )


async def _seller(client: WbClient, claimed: str) -> SellerCheck:
    status, _, words, data = await _ask(client, TARIFFS_SELLER_INFO)
    if status != "ok":
        return SellerCheck(status, claimed, words=words)
    body = data if isinstance(data, dict) else {}
    sid, name = body.get("sid"), body.get("name")
    sid = str(sid) if sid is not None else None
    found = "confirmed" if sid == claimed else "mismatch"
    said = None if found == "confirmed" else f"WB says the token is seller {sid}'s"
    return SellerCheck(found, claimed, sid, str(name) if name is not None else None, said)


async def check_token(
    client: WbClient, *, claimed_seller: str, cabinet_id: int | None = None
) -> CabinetCheck:
    """Check ``client``'s token on every used section's host and against ``claimed_seller``."""
    token: WbToken = client.token
    sections = await asyncio.gather(*(_section(client, s) for s in used_sections()))
    seller = await _seller(client, claimed_seller)
    return CabinetCheck(
        cabinet_id=cabinet_id,
        name=client.cabinet,
        token_type=token.type.value,
        expires_at=token.expires_at,
        checked_at=datetime.fromtimestamp(clock.now_ms() / 1000.0, UTC),
        sections=tuple(sections),
        seller=seller,
    )


async def check_many(
    checks: Iterable[Callable[[], Awaitable[CabinetCheck]]],
    *,
    concurrency: int = CHECK_CONCURRENCY,
) -> list[CabinetCheck]:
    """Run ``checks`` at most ``concurrency`` at a time, results in their order."""
    gate = asyncio.Semaphore(concurrency)

    async def one(check: Callable[[], Awaitable[CabinetCheck]]) -> CabinetCheck:
        async with gate:
            return await check()

    return list(await asyncio.gather(*(one(c) for c in checks)))


async def check_cabinet(runtime: Runtime, cabinet: Cabinet) -> CabinetCheck:
    """Check a stored cabinet's token (an expired one too: WB says so) against its seller."""
    token = parse_token(cabinet.token(), cabinet=cabinet.name, check_expiry=False)
    async with runtime.client_for(cabinet.name, token) as client:
        return await check_token(client, claimed_seller=cabinet.seller_id, cabinet_id=cabinet.id)


async def check_new_token(runtime: Runtime, name: str, raw: str) -> CabinetCheck:
    """Check a token before it is stored as cabinet ``name`` (``TokenError`` if malformed)."""
    token = parse_token(raw, cabinet=name, check_expiry=False)
    async with runtime.client_for(name, token) as client:
        return await check_token(client, claimed_seller=token.seller_id)
