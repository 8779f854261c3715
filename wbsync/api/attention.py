"""What needs an operator: the suspensions in force and the tokens expired or expiring soon.

Read from two queries over every cabinet (``Store.suspensions``, ``Store.token_expiries``),
never one per cabinet; the status page shows the first ``ATTENTION_SHOWN`` of each and counts
the rest, ``GET /api/v1/attention`` lists them all, and the metrics count them by state.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from wbsync.api.schemas import AttentionOut, AttentionSuspensionOut, TokenExpiryOut
from wbsync.store.suspensions import Suspension

__all__ = [
    "ATTENTION_SHOWN",
    "EXPIRING_WITHIN_DAYS",
    "Expiry",
    "StateCounts",
    "attention_out",
    "flagged",
    "lifts_of",
    "state_counts",
]

EXPIRING_WITHIN_DAYS = 14
"""A token is listed (and counted ``expiring``) from this many days before its ``exp``."""
ATTENTION_SHOWN = 50
"""The most suspensions, and the most tokens, a status page lists; the API's route lists all."""

Expiry = tuple[int, str, datetime | None]
"""(cabinet id, name, token_expires_at) of an active cabinet, as the store reads it."""

# What lifts each kind (docs/failures.md, "Suspensions").
_LIFTS: dict[str, tuple[str, ...]] = {
    "token": ("new_token", "resume", "probe"),
    "expired": ("new_token",),
    "category": ("new_token", "resume", "probe"),
    "token_type": ("new_token", "resume", "probe"),
    "refused": ("new_token", "resume", "probe"),
    "payment": ("balance", "resume", "probe"),
}


def _of_active(suspensions: Sequence[Suspension], expiries: Sequence[Expiry]) -> list[Suspension]:
    """The suspensions of active cabinets (``expiries`` lists every active one): a deactivated
    cabinet needs no attention; its suspensions show again if it is activated."""
    active = {i for i, _, _ in expiries}
    return [s for s in suspensions if s.cabinet_id in active]


def lifts_of(suspension: Suspension) -> list[str]:
    """What lifts the suspension (a probe only when one is due)."""
    lifts = _LIFTS.get(suspension.kind, ("new_token", "resume"))
    return [x for x in lifts if x != "probe" or suspension.probe_at is not None]


def _suspension_out(s: Suspension) -> AttentionSuspensionOut:
    return AttentionSuspensionOut(
        cabinet_id=s.cabinet_id,
        cabinet=s.cabinet,
        section=s.section,
        kind=s.kind,
        words=s.words,
        since=s.since,
        probe_at=s.probe_at,
        lifts=lifts_of(s),
    )


def _ordered(suspensions: Sequence[Suspension]) -> list[Suspension]:
    """The whole cabinets' first, then the oldest."""
    return sorted(suspensions, key=lambda s: (s.section is not None, s.since, s.cabinet_id))


def _due(expiries: Sequence[Expiry], now: datetime) -> list[tuple[datetime, int, str]]:
    """The tokens expired or expiring within ``EXPIRING_WITHIN_DAYS``, the soonest first."""
    horizon = now + timedelta(days=EXPIRING_WITHIN_DAYS)
    found = [(at, i, name) for i, name, at in expiries if at is not None and at <= horizon]
    found.sort()
    return found


def _token_out(due: tuple[datetime, int, str], now: datetime) -> TokenExpiryOut:
    at, cabinet_id, name = due
    return TokenExpiryOut(
        cabinet_id=cabinet_id,
        cabinet=name,
        expires_at=at,
        expired=at <= now,
        remaining_s=max(0, math.ceil((at - now).total_seconds())),
    )


def attention_out(
    suspensions: Sequence[Suspension],
    expiries: Sequence[Expiry],
    now: datetime,
    *,
    shown: int | None = None,
) -> AttentionOut:
    """What needs attention at ``now`` (active cabinets only); at most ``shown`` rows of each
    list (None: all)."""
    live = _of_active(suspensions, expiries)
    tokens = _due(expiries, now)
    return AttentionOut(
        suspensions=[_suspension_out(s) for s in _ordered(live)[:shown]],
        suspensions_total=len(live),
        tokens=[_token_out(t, now) for t in tokens[:shown]],
        tokens_total=len(tokens),
        expiring_within_days=EXPIRING_WITHIN_DAYS,
    )


def flagged(
    suspensions: Sequence[Suspension], expiries: Sequence[Expiry], now: datetime
) -> set[int]:
    """The ids of the cabinets that need attention: a suspension in force, or a token expired
    or expiring within ``EXPIRING_WITHIN_DAYS`` (the status filter ``needs-attention``)."""
    horizon = now + timedelta(days=EXPIRING_WITHIN_DAYS)
    due = {i for i, _, at in expiries if at is not None and at <= horizon}
    return due | {s.cabinet_id for s in _of_active(suspensions, expiries)}


@dataclass(frozen=True, slots=True)
class StateCounts:
    """Cabinets by state, sections suspended, and the least time left of a live token."""

    states: dict[str, int]
    sections: dict[str, int]
    least_remaining_s: float  # +Inf: no live token with a known exp


def state_counts(
    suspensions: Sequence[Suspension], expiries: Sequence[Expiry], now: datetime
) -> StateCounts:
    """``active``: active cabinets; ``expiring``: of those, a token expiring within
    ``EXPIRING_WITHIN_DAYS``; ``expired``: its exp passed; ``refused``: suspended as a whole
    cabinet for what WB said (an expired token is counted ``expired`` only). Active cabinets
    only."""
    suspensions = _of_active(suspensions, expiries)
    horizon = now + timedelta(days=EXPIRING_WITHIN_DAYS)
    known = [at for _, _, at in expiries if at is not None]
    live = [(at - now).total_seconds() for at in known if at > now]
    refused = {s.cabinet_id for s in suspensions if s.section is None and s.kind != "expired"}
    states = {
        "active": len(expiries),
        "expiring": sum(1 for at in known if now < at <= horizon),
        "expired": sum(1 for at in known if at <= now),
        "refused": len(refused),
    }
    sections = Counter(s.section for s in suspensions if s.section is not None)
    return StateCounts(states, dict(sections), min(live, default=math.inf))
