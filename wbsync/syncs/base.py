"""What a sync is: a named source of pages, each with the rows to store and the cursor after it.

A sync knows nothing of queues. It takes a client, a store and a cursor and yields pages; the
runner stores each page and saves its cursor before asking for the next one, so a deferral or a
crash between two pages loses nothing and fetches nothing twice that was stored.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from wbsync.registry import Claim, Table
from wbsync.store import Dataset, Store
from wbsync.wb.client import WbClient
from wbsync.wb.endpoints import Endpoint

Cursor = dict[str, Any]

SYNCS: Table[Sync] = Table("queue")
"""Every registered sync, by queue name, in the order they were declared."""


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
    bid_rule: BidRule = BidRule()


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
    """One sync queue, declared: what it calls, what it stores, how it pages and how often.

    ``name`` is its queue. ``long`` syncs (many pages) run under the deferral service: a long
    wait for a WB budget moves the job to BullMQ's delayed state and it resumes from its cursor;
    short ones wait in place. ``interval_s`` is the default fan-out interval
    (``WBSYNC_FANOUT_INTERVALS_S`` overrides it). ``calls`` are the WB methods it calls (what a
    cabinet's token must allow; each brings its section and limit group), ``stores`` the
    datasets its pages write. The cursor kind: an ``incremental`` sync keeps its last cursor
    across runs (the next run pulls only what is new); the others start every run from the
    beginning (a deferred run still resumes from its job's cursor).
    """

    name: str
    long: bool
    interval_s: float
    calls: tuple[Endpoint, ...]
    stores: tuple[Dataset, ...]
    pages: PageSource
    incremental: bool = False

    @property
    def methods(self) -> tuple[str, ...]:
        """The names of the WB methods it calls."""
        return tuple(ep.name for ep in self.calls)

    @property
    def datasets(self) -> tuple[str, ...]:
        """The names of the datasets it stores."""
        return tuple(ds.name for ds in self.stores)

    def claims(self) -> Iterator[Claim]:
        """The queue, and the methods (with sections and groups) and datasets it brings."""
        yield Claim(SYNCS, self.name, self)
        for ep in self.calls:
            yield from ep.claims()
        for ds in self.stores:
            yield from ds.claims()
