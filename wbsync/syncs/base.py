"""What a sync is: a named source of pages, each with the rows to store and the cursor after it.

A sync knows nothing of queues. It takes a client, a store and a cursor and yields pages; the
runner stores each page and saves its cursor before asking for the next one, so a deferral or a
crash between two pages loses nothing and fetches nothing twice that was stored.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from wbsync.config import FUNNEL_DAYS_MAX
from wbsync.store import Store
from wbsync.wb.client import WbClient

Cursor = dict[str, Any]


@dataclass(frozen=True, slots=True)
class SyncPage:
    """One reply's rows for ``dataset`` and the cursor that resumes right after them.

    A page with ``dataset=None`` is a checkpoint: it only moves the cursor (e.g. to the next
    phase) and is not counted as a fetched page.
    """

    dataset: str | None
    rows: Sequence[Mapping[str, Any]]
    cursor: Cursor

    @classmethod
    def checkpoint(cls, cursor: Cursor) -> SyncPage:
        """A page that only saves ``cursor``."""
        return cls(dataset=None, rows=(), cursor=cursor)


@dataclass(frozen=True, slots=True)
class BidRule:
    """The autobidder's rule: move each bid by at most ``step`` toward ``target``, within bounds."""

    min_bid: int = 150
    max_bid: int = 1000
    target: int = 400
    step: int = 50

    def next_bid(self, bid: int) -> int:
        """The bid to set instead of ``bid``."""
        delta = max(-self.step, min(self.step, self.target - bid))
        return max(self.min_bid, min(self.max_bid, bid + delta))


@dataclass(frozen=True, slots=True)
class SyncOptions:
    """Windows and rules the syncs share."""

    lookback_days: int = 30
    stats_days: int = 7
    funnel_days: int = FUNNEL_DAYS_MAX
    bid_rule: BidRule = BidRule()

    def __post_init__(self) -> None:
        if not 1 <= self.funnel_days <= FUNNEL_DAYS_MAX:
            raise ValueError(
                f"funnel_days must be 1 to {FUNNEL_DAYS_MAX}: WB serves the sales-funnel "
                f"history of the last week only, got {self.funnel_days}"
            )


@dataclass(frozen=True, slots=True)
class SyncInput:
    """Everything one run of a sync gets."""

    client: WbClient
    store: Store
    cabinet_id: int
    cursor: Cursor | None
    today: date
    options: SyncOptions = SyncOptions()


PageSource = Callable[[SyncInput], AsyncIterator[SyncPage]]


@dataclass(frozen=True, slots=True)
class Sync:
    """One sync queue: its pages, whether it is long (deferrable), and its fan-out interval.

    ``incremental`` syncs keep their last cursor across runs (the next run pulls only what is
    new); the others start every run from the beginning.
    """

    name: str
    long: bool
    interval_s: float
    datasets: tuple[str, ...]
    pages: PageSource
    incremental: bool = False
    methods: tuple[str, ...] = ()
    """The WB methods (endpoint names) the sync calls: what a cabinet's token must allow."""
