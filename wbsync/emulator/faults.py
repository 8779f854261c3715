"""Faults on demand: which request gets a 5xx, a slow reply, a drop, a bad body, a 429 or a
seller's global penalty.

Rules are checked in order; the first that hits decides. A rule with ``count`` hits the next N
matching requests and is then spent; otherwise it hits with probability ``share`` drawn from a
seeded RNG, so a run with the same seed and the same request order injects the same faults.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from wbsync.emulator.config import FaultRule

__all__ = ["FaultPlan"]

#: Kinds decided before the method's bucket (a penalty, WB's global limiter in front of it).
BEFORE_BUCKET = frozenset({"rate_limit", "global_limit"})


@dataclass(slots=True)
class _Armed:
    rule: FaultRule
    left: int | None


class FaultPlan:
    """The active fault rules and the RNG that draws shares."""

    def __init__(self, rules: list[FaultRule], *, seed: int = 0) -> None:
        self._seed = seed
        self._rng = random.Random(f"faults:{seed}")
        self._armed = [_Armed(r, r.count) for r in rules]

    def replace(self, rules: list[FaultRule], seed: int | None = None) -> None:
        """Make ``rules`` the active rules (and reseed, so runs repeat)."""
        self._seed = self._seed if seed is None else seed
        self._rng = random.Random(f"faults:{self._seed}")
        self._armed = [_Armed(r, r.count) for r in rules]

    def clear(self) -> None:
        """No faults."""
        self._armed = []

    def rules(self) -> list[dict[str, object]]:
        """The active rules with what is left of their counts."""
        return [a.rule.model_dump() | {"left": a.left} for a in self._armed]

    def draw(self, method: str, seller: str, *, before_bucket: bool) -> FaultRule | None:
        """The fault this request gets at this stage, if any (spending a count)."""
        for armed in self._armed:
            rule = armed.rule
            if (rule.kind in BEFORE_BUCKET) != before_bucket:
                continue
            if rule.method not in ("*", method) or rule.seller not in (None, seller):
                continue
            if armed.left is not None:
                if armed.left <= 0:
                    continue
                armed.left -= 1
                return rule
            if self._rng.random() < rule.share:
                return rule
        return None
