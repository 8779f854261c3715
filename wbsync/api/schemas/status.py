"""The status's one model: what a status read asks for (``StatusQuery``) and what it answers
(``StatusOut``, with its parts).

The reader (``wbsync.api.status_read``) fills a ``StatusOut``; ``GET /api/v1/status`` serves it
as it is, and the status page (``templates/status.html``) renders the same object. A new figure
is a field here, the line of the reader that fills it and the template's cell that shows it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, get_args

from pydantic import BaseModel, Field, PrivateAttr

from wbsync.api.schemas.attention import AttentionOut
from wbsync.api.schemas.cabinets import CabinetOut
from wbsync.api.schemas.jobs import BucketOut, JobOut, RunOut
from wbsync.api.schemas.penalties import PenaltyOut
from wbsync.jobs.model import LIVE_STATES

__all__ = [
    "PER_PAGE_MAX",
    "SORT_ORDERS",
    "STATES",
    "STATE_FILTERS",
    "CabinetBucketOut",
    "CabinetJobOut",
    "CabinetStatusOut",
    "LagOut",
    "SortOrder",
    "StateFilter",
    "StatusOut",
    "StatusQuery",
    "ThroughputOut",
]

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
"""The job states each queue is counted by."""


@dataclass(frozen=True, slots=True)
class StatusQuery:
    """What a status read asks for: a search, a state filter, an order and a page (from 1)."""

    search: str = ""
    state: StateFilter = "all"
    sort: SortOrder = "stuck"
    page: int = 1
    per_page: int = 50


class CabinetStatusOut(BaseModel):
    """A cabinet on a status page: its jobs, its syncs' last runs, since when it is stuck."""

    cabinet: CabinetOut
    stuck_since: datetime | None = Field(
        description="Its oldest last success (or its creation) while a job of it is pending."
    )
    jobs: list[JobOut]
    runs: list[RunOut]
    unserved: dict[str, str] = Field(
        description="Queues its token cannot serve (the fan-out skips them), with why."
    )


class CabinetJobOut(BaseModel):
    """A job with its cabinet."""

    cabinet: CabinetOut
    job: JobOut


class CabinetBucketOut(BaseModel):
    """A bucket with its cabinet's name."""

    cabinet: str
    bucket: BucketOut


class LagOut(BaseModel):
    """How late one queue's scheduled runs started after they were due, over the recent window."""

    runs: int = Field(description="Runs that started in the window.")
    p50_s: float
    p95_s: float
    max_s: float


class StatusOut(BaseModel):
    """One page of the status: totals over every cabinet and queue, the page's cabinets."""

    generated_at: datetime
    time_scale: float
    counters: dict[str, float]
    queues: dict[str, dict[str, int]] = Field(description="Jobs per state of each queue.")
    lag: dict[str, LagOut] = Field(
        default_factory=dict,
        description="Per queue with runs in the last lag_window_s (every process): how late "
        "the runs the fan-out scheduled started after they were due, in real seconds.",
    )
    lag_window_s: float = Field(description="The window the lag figures cover (real seconds).")
    unloaded_queues: list[str] = Field(
        default_factory=list,
        description="Queues with recorded runs that this process does not load (a plugin "
        "loaded by another process sharing the database): not loaded here.",
    )
    total: int = Field(description="Cabinets in all.")
    matched: int = Field(description="Cabinets that match the search and filter.")
    page: int
    per_page: int
    pages: int
    cabinets: list[CabinetStatusOut]
    waiting: list[CabinetJobOut] = Field(description="The page's jobs delayed by a window.")
    failed: list[CabinetJobOut] = Field(description="The page's failed jobs, latest first.")
    busiest_buckets: list[CabinetBucketOut]
    penalties: list[PenaltyOut] = Field(
        default_factory=list,
        description="WB's penalties in force over every cabinet, the longest first; only the "
        "first of many (penalties_total counts them all, GET /api/v1/penalties lists them).",
    )
    penalties_total: int = Field(default=0, description="Penalties in force in all.")
    attention: AttentionOut = Field(
        default_factory=AttentionOut,
        description="Needs attention: suspensions and tokens expired or expiring; only the first "
        "of many (the totals count them all, GET /api/v1/attention lists them).",
    )
    _rendered: dict[str, bytes] = PrivateAttr(default_factory=dict)
    """Renderings of this page (JSON, HTML), made once however many viewers ask."""

    def rendered(self, kind: str, render: Callable[[StatusOut], bytes]) -> bytes:
        """The page rendered as ``kind`` (``json``, ``html``): rendered once, then kept."""
        if kind not in self._rendered:
            self._rendered[kind] = render(self)
        return self._rendered[kind]


class ThroughputOut(BaseModel):
    """Pages stored and 429s from WB per queue and minute, over the last hour (all processes)."""

    minutes: list[int] = Field(description="Each minute's start, epoch ms, oldest first.")
    queues: dict[str, dict[str, list[int]]] = Field(
        description='Per queue: {"pages": [...], "upstream_429": [...]}, one count per minute.'
    )
