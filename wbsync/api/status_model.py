"""The status's view model: what a status read asks for and what it answers.

A ``StatusQuery`` (a search, a state filter, an order, a page) is answered by a ``StatusPage``
(totals over every cabinet, the page's ``CabinetStatus`` details); ``status_out`` is the page as
the API's JSON shows it, the HTML page (``wbsync.api.page``) renders the same object.
``wbsync.api.status`` reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, get_args

from wbsync.api.schemas import (
    AttentionOut,
    BucketOut,
    CabinetBucketOut,
    CabinetJobOut,
    CabinetOut,
    CabinetStatusOut,
    JobOut,
    LagOut,
    PenaltyOut,
    RunOut,
    StatusOut,
)
from wbsync.jobs.lag import LAG_WINDOW_S, LagFigure
from wbsync.jobs.model import LIVE_STATES

PER_PAGE_MAX = 200
"""The most cabinets one status page shows."""

StateFilter = Literal[
    "all",
    "failed",
    "deferred",
    "running",
    "waiting",
    "idle",
    "disabled-method",
    "learned-limit",
    "penalty",
    "needs-attention",
]
SortOrder = Literal["stuck", "id", "name"]
STATE_FILTERS: tuple[str, ...] = get_args(StateFilter)
SORT_ORDERS: tuple[str, ...] = get_args(SortOrder)
STATES = (*LIVE_STATES, "failed")


@dataclass(frozen=True, slots=True)
class StatusQuery:
    """What a status read asks for: a search, a state filter, an order and a page (from 1)."""

    search: str = ""
    state: StateFilter = "all"
    sort: SortOrder = "stuck"
    page: int = 1
    per_page: int = 50


@dataclass
class CabinetStatus:
    """A cabinet with its jobs (live and failed), its last runs and since when it is stuck."""

    cabinet: CabinetOut
    jobs: list[JobOut]
    runs: list[RunOut] = field(default_factory=list)
    stuck_since: datetime | None = None
    unserved: dict[str, str] = field(default_factory=dict)


@dataclass
class StatusPage:
    """One page of the status: totals over every cabinet, details of the page's cabinets."""

    generated_at: datetime
    time_scale: float
    queues: dict[str, dict[str, int]]
    counters: dict[str, float]
    query: StatusQuery
    total: int
    matched: int
    cabinets: list[CabinetStatus]
    buckets: list[tuple[str, BucketOut]] = field(default_factory=list)
    lag: dict[str, LagFigure] = field(default_factory=dict)
    """Per queue with recent runs: how late they started (``wbsync.jobs.lag``)."""
    unloaded_queues: list[str] = field(default_factory=list)
    """Queues with recorded runs that this process does not load (a plugin loaded elsewhere)."""
    penalties: list[PenaltyOut] = field(default_factory=list)
    """WB's penalties in force over every cabinet, the longest first (at most PENALTIES_SHOWN)."""
    penalties_total: int = 0
    """How many penalties are in force in all."""
    attention: AttentionOut = field(default_factory=AttentionOut)
    """Needs attention: suspensions, tokens expired or expiring (at most ATTENTION_SHOWN each)."""
    rendered: dict[str, bytes] = field(default_factory=dict, repr=False)
    """Renderings of this page (JSON, HTML), made once however many viewers ask."""

    @property
    def pages(self) -> int:
        """How many pages the matching cabinets fill (at least 1)."""
        return max(1, -(-self.matched // self.query.per_page))

    @property
    def waiting(self) -> list[tuple[CabinetOut, JobOut]]:
        """The page's delayed jobs with their cabinet, soonest resume first."""
        rows = [(c.cabinet, j) for c in self.cabinets for j in c.jobs if j.state == "delayed"]
        return sorted(rows, key=lambda row: row[1].resume_in_ms or 0)

    @property
    def failed(self) -> list[tuple[CabinetOut, JobOut]]:
        """The page's failed jobs with their cabinet, latest failure first."""
        rows = [(c.cabinet, j) for c in self.cabinets for j in c.jobs if j.state == "failed"]
        return sorted(rows, key=lambda row: row[1].failed_at or row[0].created_at, reverse=True)


def status_out(page: StatusPage) -> StatusOut:
    """The page as the API shows it."""
    return StatusOut(
        generated_at=page.generated_at,
        time_scale=page.time_scale,
        counters=page.counters,
        queues=page.queues,
        lag={q: LagOut.model_validate(f, from_attributes=True) for q, f in page.lag.items()},
        lag_window_s=LAG_WINDOW_S,
        unloaded_queues=page.unloaded_queues,
        total=page.total,
        matched=page.matched,
        page=page.query.page,
        per_page=page.query.per_page,
        pages=page.pages,
        cabinets=[CabinetStatusOut.model_validate(c, from_attributes=True) for c in page.cabinets],
        waiting=[CabinetJobOut(cabinet=c, job=j) for c, j in page.waiting],
        failed=[CabinetJobOut(cabinet=c, job=j) for c, j in page.failed],
        busiest_buckets=[CabinetBucketOut(cabinet=n, bucket=b) for n, b in page.buckets],
        penalties=page.penalties,
        penalties_total=page.penalties_total,
        attention=page.attention,
    )
