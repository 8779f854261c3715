"""What a sync is: a named source of pages, each with the rows to store and the cursor after it.

A sync knows nothing of queues. It takes a client, a store and a cursor and yields pages; the
runner stores each page and saves its cursor before asking for the next one, so a deferral or a
crash between two pages loses nothing and fetches nothing twice that was stored.

Each sync declares the shape of the cursor it writes (a ``CursorShape``); the runner checks a
cursor against it before the sync sees it, so a cursor wbsync did not write (a hand edit, a
foreign producer, a cursor of another sync) is refused with the field and what is wrong,
never followed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, Strict, ValidationError

from wbsync.catalog.registry import Claim, Table
from wbsync.config import FUNNEL_DAYS_MAX
from wbsync.errors import MalformedJobError
from wbsync.store import Dataset, Store
from wbsync.wb.client import WbClient
from wbsync.wb.endpoints import Endpoint

Cursor = dict[str, Any]

#: A cursor's count, offset or WB id: an integer (not a float, a string or a boolean), >= 0.
Count = Annotated[int, Strict(), Field(ge=0)]
#: A cursor's flag: true or false, nothing else.
Flag = Annotated[bool, Strict()]
#: A cursor's text.
Text = Annotated[str, Strict()]
# How much of a refused value a reason quotes.
_QUOTED_CHARS = 60


def optional() -> Any:
    """A cursor field that may be absent; when present, it must be of its declared type."""
    return Field(default=None)


class CursorShape(BaseModel):
    """The shape of a sync's cursor: a subclass per sync lists the fields the sync writes, each
    with its type. A field not listed, or of another type, refuses the cursor."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class CardsPosition(CursorShape):
    """A position in WB's content cards list: the last card's ``updatedAt`` and ``nmID``."""

    updatedAt: Text | None  # WB's names, as the cursor stores them
    nmID: Count | None


_PHRASES = {
    "int_type": "must be an integer",
    "bool_type": "must be true or false",
    "string_type": "must be a string",
    "list_type": "must be a list",
    "tuple_type": "must be a list",
    "model_type": "must be a JSON object",
    "dict_type": "must be a JSON object",
    "extra_forbidden": "is not a field of this cursor",
    "missing": "is missing",
}


def _quoted(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _QUOTED_CHARS else text[:_QUOTED_CHARS] + "..."


def _refusal(sync: str, exc: ValidationError) -> str:
    """The first thing wrong with a cursor, said in words: field, rule and the value found."""
    error = exc.errors()[0]
    field = ".".join(str(part) for part in error["loc"])
    rule = _PHRASES.get(error["type"], error["msg"].replace("Input should be", "must be"))
    found = "" if error["type"] == "missing" else f", got {_quoted(error['input'])}"
    subject = f"cursor field {field}" if field else "cursor"
    return (
        f"{sync}: {subject} {rule}{found}; a cursor wbsync did not write is refused (clear the "
        "job's cursor, or delete the cabinet's row of wb_sync_cursors, to start over)"
    )


SYNCS: Table[Sync] = Table("queue")
"""Every registered sync, by queue name, in the order they were declared."""


@dataclass(frozen=True, slots=True)
class SyncPage:
    """One reply's rows for ``dataset`` and the cursor that resumes right after them.

    A page with ``dataset=None`` is a checkpoint: it only moves the cursor (e.g. to the next
    phase) and is not counted as a fetched page.

    ``whole``: the page is every row the cabinet has in its dataset, a snapshot WB returns in one
    reply (the booking monitor's coefficients). When it is the first page of a run of a sync
    storing that one snapshot dataset, the rows it lacks are tombstoned in the page's own write,
    and the run keeps no snapshot run (no seen keys, no end of run to count them). Elsewhere (a
    resumed run, a sync storing several datasets) it is stored as any page. Nothing of its
    dataset should follow it in the run: a later page's rows would only be written live again.
    """

    dataset: str | None
    rows: Sequence[Mapping[str, Any]]
    cursor: Cursor
    whole: bool = False

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
    report_horizon_days: int = 90
    """How far back a dated report task's first run starts."""
    report_recent_days: int = 8
    """Days before the last day stored that a dated report task's later runs ask for again."""
    report_deadline_s: float = 3600.0
    """How long WB may take to build a report task (already scaled by the time scale)."""
    report_recreate_max: int = 3
    """Times a task WB lost is created again for one window."""

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
    """The cabinet it runs for; a fleet-wide sync's run, the cabinet whose token carries it."""
    cursor: Cursor | None
    today: date
    """Today at WB (``clock.wb_today()``: Moscow's date); every window a sync sends ends on it."""
    options: SyncOptions = SyncOptions()


PageSource = Callable[[SyncInput], AsyncIterator[SyncPage]]


@dataclass(frozen=True, slots=True)
class Sync:
    """One sync queue, declared: what it calls, what it stores, how it pages and how often.

    ``name`` is its queue. ``long`` syncs (many pages) run under the deferral service: a long
    wait for a WB budget moves the job to BullMQ's delayed state and it resumes from its cursor;
    short ones wait in place. ``interval_s`` is the default fan-out interval
    (``WBSYNC_FANOUT_INTERVALS_S`` overrides it). ``calls`` are the WB methods it calls (what a
    cabinet's token must allow; each brings its section and limit group), ``also_calls`` the
    methods it calls instead where the token allows them, and not otherwise (the autobidder's
    v1 bids method: Personal and Service tokens only), ``stores`` the datasets its pages write.
    The cursor kind: an ``incremental`` sync keeps its last cursor across runs (the next run
    pulls only what is new); the others start every run from the beginning (a deferred run
    still resumes from its job's cursor).
    """

    name: str
    long: bool
    interval_s: float
    calls: tuple[Endpoint, ...]
    stores: tuple[Dataset, ...]
    pages: PageSource
    cursor: type[CursorShape]
    """The shape of the cursors the sync writes; any other cursor is refused."""
    incremental: bool = False
    also_calls: tuple[Endpoint, ...] = ()
    concurrency: int | None = None
    """Jobs its queue runs at once per process unless ``WBSYNC_QUEUE_CONCURRENCY`` names the
    queue; None: ``WBSYNC_SYNC_QUEUE_CONCURRENCY``. For a queue whose runs are many more than
    the others' (the booking monitor's, every minute for every cabinet): its slots must hold its
    runs in flight (docs/scaling.md, "Slots")."""

    def __post_init__(self) -> None:
        if self.concurrency is not None and self.concurrency < 1:
            raise ValueError(f"{self.name}: concurrency must be >= 1, got {self.concurrency}")
        scopes = {ds.scope for ds in self.stores}
        if len(scopes) > 1:
            raise ValueError(
                f"{self.name}: it stores fleet-wide and per-cabinet datasets; a sync runs for "
                "one cabinet or for the fleet, so declare two syncs"
            )
        if self.fleet and self.incremental:
            raise ValueError(
                f"{self.name}: a fleet-wide sync keeps no cursor across runs (it is no "
                "cabinet's), so it cannot be incremental"
            )

    @property
    def fleet(self) -> bool:
        """True when it stores fleet-wide datasets (``Dataset.scope``): one run per interval
        for the whole fleet, with the token of one cabinet that may call its methods."""
        return bool(self.stores) and all(ds.fleet for ds in self.stores)

    @property
    def methods(self) -> tuple[str, ...]:
        """The names of the WB methods it calls (those it may also call last)."""
        return tuple(ep.name for ep in (*self.calls, *self.also_calls))

    @property
    def datasets(self) -> tuple[str, ...]:
        """The names of the datasets it stores."""
        return tuple(ds.name for ds in self.stores)

    def claims(self) -> Iterator[Claim]:
        """The queue, and the methods (with sections and groups) and datasets it brings."""
        yield Claim(SYNCS, self.name, self)
        for ep in (*self.calls, *self.also_calls):
            yield from ep.claims()
        for ds in self.stores:
            yield from ds.claims()

    def check_cursor(self, cursor: object) -> None:
        """``MalformedJobError`` naming the field and the fault unless ``cursor`` is None (start
        over) or of the sync's declared shape."""
        if cursor is None:
            return
        try:
            self.cursor.model_validate(cursor)
        except ValidationError as exc:
            raise MalformedJobError(_refusal(self.name, exc)) from None
