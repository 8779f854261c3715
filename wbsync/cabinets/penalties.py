"""WB's penalties as an operator meets them: whose they are, and lifting one by hand.

The limiter keeps each penalty in the shared Redis, per (seller, limit group), with WB's words
and when it lifts (``RateLimiter.penalties``, ``RateLimiter.lift``). A seller is what WB counts,
not a cabinet: here a penalty is matched to the cabinets holding its seller's tokens (none,
when no stored cabinet has that seller any more), and lifting one writes the audit line the API
and the command line share.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Iterable
from typing import Protocol, TypeVar

from wbsync.ratelimit import GLOBAL_GROUP, Penalty, RateLimiter
from wbsync.wb.endpoints import GROUPS

__all__ = ["GroupUnknown", "by_seller", "check_group", "known_groups", "lift", "remaining_text"]

log = logging.getLogger(__name__)


class _Owned(Protocol):
    """A cabinet as the store gives it (with or without its token)."""

    @property
    def id(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def seller_id(self) -> str: ...


C = TypeVar("C", bound=_Owned)


class GroupUnknown(ValueError):
    """A limit group no registered method spends, and not the seller's global limiter."""


def known_groups() -> list[str]:
    """Every group a penalty may be on: the seller's global limiter, then each method group."""
    return [GLOBAL_GROUP, *sorted(GROUPS)]


def check_group(group: str) -> None:
    """``GroupUnknown`` (naming the groups there are) unless ``group`` is a known one."""
    if group not in known_groups():
        raise GroupUnknown(f"no limit group {group!r}; groups: {', '.join(known_groups())}")


def by_seller(cabinets: Iterable[C]) -> dict[str, list[C]]:
    """The cabinets of each seller id, in the order given."""
    found: dict[str, list[C]] = defaultdict(list)
    for cabinet in cabinets:
        found[cabinet.seller_id].append(cabinet)
    return found


def remaining_text(ms: float) -> str:
    """A remaining time as an operator reads it: ``5 h 04 min``, ``9 min 24 s``, ``29 s``."""
    seconds = max(0, math.ceil(ms / 1000))  # never "0 s" while one is in force
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    return f"{minutes} min {seconds:02d} s" if minutes else f"{seconds} s"


async def lift(limiter: RateLimiter, cabinet: _Owned, group: str, *, by: str) -> Penalty | None:
    """End the penalty of the cabinet's seller on ``group`` for every process, and say so in
    one audit line naming ``by`` (who lifted it); None when no penalty was in force.

    ``GroupUnknown`` for a group there is not (checked before Redis is asked).
    """
    check_group(group)
    penalty = await limiter.lift(cabinet.seller_id, group)
    if penalty is not None:
        # WARNING: a request WB may penalise again now goes out; the log must show who allowed it.
        log.warning(
            "WB penalty lifted by hand by %s: cabinet %s %r (seller %s), group %s, %s "
            "(%d ms) remained; WB had said: %s",
            by,
            cabinet.id,
            cabinet.name,
            cabinet.seller_id,
            group,
            remaining_text(penalty.remaining_ms),
            penalty.remaining_ms,
            penalty.words or "nothing",
            extra={"cabinet": str(cabinet.id)},
        )
    return penalty
