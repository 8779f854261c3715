"""What a bucket is: WB's limit parameters and the (cabinet, group) it belongs to.

Value types at the bottom of the layers (they import nothing of wbsync): the limiter, the Redis
key names, the error tree and the client all name a bucket by them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Limit:
    """WB's token-bucket parameters: ``limit`` requests per ``period_s``, bucket size ``burst``.

    Capacity is ``burst``; one token refills every ``period_s / limit`` seconds.
    """

    period_s: float
    limit: int
    burst: int

    def __post_init__(self) -> None:
        if self.period_s <= 0 or self.limit < 1 or self.burst < 1:
            raise ValueError(f"a limit needs period_s > 0, limit >= 1 and burst >= 1; got {self!r}")

    @property
    def interval_ms(self) -> float:
        """Milliseconds between two refilled tokens."""
        return self.period_s * 1000.0 / self.limit

    def scaled(self, factor: float) -> Limit:
        """The same limit with its period multiplied by ``factor`` (the time scale)."""
        return Limit(period_s=self.period_s * factor, limit=self.limit, burst=self.burst)


@dataclass(frozen=True, slots=True)
class BucketScope:
    """One shared bucket: a cabinet (WB seller id) and a limit group, with its limit."""

    cabinet: str
    group: str
    limit: Limit

    def __str__(self) -> str:
        return f"{self.group}@{self.cabinet}"
