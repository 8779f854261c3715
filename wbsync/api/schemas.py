"""What the API reads and writes: request bodies and replies, and the conversions into them."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer

from wbsync import clock
from wbsync.jobs.views import JobView
from wbsync.ratelimit import GLOBAL_GROUP, Penalty
from wbsync.store import Cabinet, CabinetOverview, RunRecord
from wbsync.store.changes import (
    Change,
    ChangeOp,
    ChangePage,
    SnapshotPage,
    cursor_token,
    utc_text,
)
from wbsync.syncs import SYNCS

__all__ = [
    "AttentionOut",
    "AttentionSuspensionOut",
    "BucketOut",
    "CabinetBucketOut",
    "CabinetCheckOut",
    "CabinetIn",
    "CabinetJobOut",
    "CabinetOut",
    "CabinetStatusOut",
    "CabinetTokenOut",
    "ChangeOut",
    "ChangePageOut",
    "JobOut",
    "LimitOut",
    "PenaltyOut",
    "RenameIn",
    "ResumeIn",
    "ResumeOut",
    "RowsOut",
    "RunOut",
    "SnapshotPageOut",
    "StatusOut",
    "SuspensionOut",
    "ThroughputOut",
    "TokenExpiryOut",
    "TokenIn",
    "TriggerOut",
    "cabinet_out",
    "change_page_out",
    "job_out",
    "penalty_out",
    "run_out",
    "snapshot_page_out",
]


class CabinetIn(BaseModel):
    """A new cabinet: a name of the caller's choice and the WB token (write-only)."""

    model_config = ConfigDict(extra="forbid")

    # Any text but NUL (PostgreSQL cannot store it), with at least one visible character.
    name: str = Field(min_length=1, max_length=200, pattern=r"^[^\x00]*[^\x00\s][^\x00]*$")
    token: str = Field(min_length=1, max_length=8192, repr=False)


class TokenIn(BaseModel):
    """A cabinet's new WB token (write-only)."""

    model_config = ConfigDict(extra="forbid")

    token: str = Field(min_length=1, max_length=8192, repr=False)


class ResumeIn(BaseModel):
    """Which suspension to lift: one section's, or (no body, or no section) all of them."""

    model_config = ConfigDict(extra="forbid")

    section: str | None = Field(default=None, min_length=1, max_length=100)


class SuspensionOut(BaseModel):
    """A suspension: what WB refused for good (docs/failures.md)."""

    section: str | None = Field(description="The WB section; null: the whole cabinet.")
    kind: str = Field(description="token, expired, category, token_type, payment or refused.")
    words: str | None = Field(description="What WB said (null for an expired token).")
    since: datetime
    probe_at: datetime | None


class AttentionSuspensionOut(SuspensionOut):
    """A suspension in force, with its cabinet and what lifts it."""

    cabinet_id: int
    cabinet: str = Field(description="The cabinet's name.")
    lifts: list[str] = Field(
        description="What lifts it, of: new_token (wbsync cabinets token, PUT "
        "/api/v1/cabinets/{id}/token), balance (money on the WB balance, then a resume or a "
        "probe), resume (wbsync cabinets resume, POST /api/v1/cabinets/{id}/resume), probe (at "
        "probe_at, when WB accepts it)."
    )


class TokenExpiryOut(BaseModel):
    """An active cabinet whose token has expired or expires soon."""

    cabinet_id: int
    cabinet: str = Field(description="The cabinet's name.")
    expires_at: datetime = Field(description="The token's exp.")
    expired: bool = Field(description="True once exp has passed: nothing is sent to WB.")
    remaining_s: int = Field(description="Seconds until exp (0 once expired).")


class AttentionOut(BaseModel):
    """The cabinets that need an operator: suspensions in force, tokens expired or expiring."""

    suspensions: list[AttentionSuspensionOut] = Field(
        default_factory=list,
        description="Suspensions in force, the whole cabinets' first, then by since.",
    )
    suspensions_total: int = Field(default=0, description="Suspensions in force in all.")
    tokens: list[TokenExpiryOut] = Field(
        default_factory=list,
        description="Active cabinets' tokens expired or expiring within expiring_within_days, "
        "the soonest first (the expired ones first of all).",
    )
    tokens_total: int = Field(default=0, description="Such tokens in all.")
    expiring_within_days: int = Field(
        default=14, description="A token is listed from this many days before it expires."
    )


class ResumeOut(BaseModel):
    """The cabinet resumed and the suspensions lifted."""

    id: int
    name: str
    lifted: list[SuspensionOut]


class RenameIn(BaseModel):
    """A cabinet's new name."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200, pattern=r"^[^\x00]*[^\x00\s][^\x00]*$")


class CabinetOut(BaseModel):
    """A stored cabinet. The token is never part of a reply."""

    id: int
    name: str
    seller_id: str
    active: bool
    created_at: datetime


class JobOut(BaseModel):
    """A live (or finished) job of one (queue, cabinet)."""

    job_id: str
    queue: str
    cabinet: str
    state: str
    attempts_made: int
    deferrals: int = Field(
        description="Times the job was moved to delayed by a rate limit or while WB built a "
        "report it asked for."
    )
    deferred_by: str | None = Field(
        description="What it last waited on: the limit group whose window it waited, or "
        '"waiting on WB\'s report <report> (task <id>)".'
    )
    resume_at: datetime | None = Field(description="For a delayed job: when it runs again.")
    resume_in_ms: int | None
    cursor: Any = None
    failed_reason: str | None = None
    created_at: datetime | None = Field(default=None, description="When the job was added.")
    failed_at: datetime | None = Field(
        default=None, description="For a failed job: when its last attempt ended."
    )


class RunOut(BaseModel):
    """The last successful run and the last failure of one (queue, cabinet)."""

    queue: str
    success_at: datetime | None
    success_pages: int | None
    success_rows: int | None = Field(
        description="Rows the last successful run fetched from WB over all its deferrals "
        "(stored, but written only where they changed: wbsync_sync_rows_written_total counts "
        "those)."
    )
    failure_at: datetime | None
    failure_reason: str | None
    failure_attempts: int | None
    loaded: bool = Field(
        default=True,
        description="False when this process does not know the queue (its plugin is loaded by "
        "another process sharing the database): shown as not loaded here.",
    )


class CabinetTokenOut(CabinetOut):
    """A cabinet just given a token, with the queues that token cannot serve."""

    unserved: dict[str, str] = Field(
        description="Queues the token cannot serve (the fan-out skips them), with why."
    )


class TriggerOut(BaseModel):
    """A job added by a trigger."""

    job_id: str
    queue: str
    cabinet: str
    state: str


class LimitOut(BaseModel):
    """WB's limit of a bucket for the cabinet's token type (unscaled), and the time scale."""

    period_s: float
    limit: int
    burst: int
    time_scale: float


class LearnedOut(BaseModel):
    """A limit learned from WB's replies (unscaled, like ``LimitOut``) and when it expires."""

    period_s: float
    limit: int
    burst: int
    expires_in_ms: int


class BucketOut(BaseModel):
    """One shared bucket of a cabinet: tokens left, and when a token is next there."""

    group: str
    methods: list[str]
    limit: LimitOut
    tokens_left: int
    capacity: int
    next_token_in_ms: int = Field(description="0 when a token is there now.")
    next_token_at: datetime
    learned: LearnedOut | None = Field(
        default=None,
        description="A stricter limit learned from WB's replies, in force instead of `limit` "
        "until it expires.",
    )


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


class PenaltyOut(BaseModel):
    """A penalty WB gave a seller, in force for every process until it lifts."""

    seller_id: str
    cabinets: list[CabinetOut] = Field(
        description="The cabinets of this seller; empty when no stored cabinet has it."
    )
    group: str = Field(description="The limit group it holds, or the seller's global limiter.")
    global_limiter: bool = Field(
        description="True when it is on WB's global limiter of the seller: every method waits."
    )
    words: str | None = Field(description="What WB said (bounded, sanitised); null if nothing.")
    until: datetime = Field(description="When it lifts.")
    remaining_ms: int


def penalty_out(penalty: Penalty, cabinets: list[CabinetOut], now_ms: float) -> PenaltyOut:
    """A penalty as the API shows it, with its seller's cabinets and its time left at ``now_ms``."""
    return PenaltyOut(
        seller_id=penalty.seller,
        cabinets=cabinets,
        group=penalty.group,
        global_limiter=penalty.group == GLOBAL_GROUP,
        words=penalty.words,
        until=at_ms(penalty.until_ms),
        remaining_ms=max(0, math.ceil(penalty.until_ms - now_ms)),
    )


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


class ThroughputOut(BaseModel):
    """Pages stored and 429s from WB per queue and minute, over the last hour (all processes)."""

    minutes: list[int] = Field(description="Each minute's start, epoch ms, oldest first.")
    queues: dict[str, dict[str, list[int]]] = Field(
        description='Per queue: {"pages": [...], "upstream_429": [...]}, one count per minute.'
    )


class RowsOut(BaseModel):
    """Rows read from WB on demand."""

    rows: list[dict[str, Any]]
    next_offset: int | None = None


class ChangeOut(BaseModel):
    """One row's last write: its sequence number, natural key, operation, WB's data."""

    seq: int
    cabinet_id: int
    key: dict[str, int | str]
    op: ChangeOp = Field(
        description="insert: the row's first version (or its return after a delete); update: "
        "a later version; delete: a tombstone (its data is the row's last). Rows last written "
        "before migration 0008 read as update."
    )
    deleted: bool = Field(description="The row is a tombstone (op is delete).")
    changed_at: datetime = Field(
        description="When the row was written (UTC, ending in Z); never decreases along seq."
    )
    data: dict[str, Any]

    @field_serializer("changed_at")
    def _utc(self, value: datetime) -> str:
        return utc_text(value)


class ChangePageOut(BaseModel):
    """A page of a dataset's change feed; send ``cursor`` (or ``next``) as ``after`` next."""

    dataset: str
    changes: list[ChangeOut]
    next: int = Field(description="The last seq of this page: a bare-number cursor.")
    cursor: str = Field(
        description="`next` as the token `<dataset>:<seq>`, the recommended `after`: a token "
        "of another dataset is refused, where a bare number cannot be checked."
    )
    more: bool
    low_water: int = Field(
        description="The feed's low-water mark: the lowest `after` from which it is complete, "
        "deletes included. Tombstones pruned after their grace raise it; retention pruning of "
        "dated rows does not (it is not in the feed). An `after` above 0 below it is 410."
    )


class SnapshotPageOut(BaseModel):
    """A page of a consistent snapshot of the live rows as of ``at`` (the resync)."""

    dataset: str
    at: int = Field(description="The snapshot's sequence number: send it with every page.")
    changes: list[ChangeOut] = Field(description="Live rows with after < seq <= at.")
    next: int = Field(description="The last seq of this page: the next page's `after`.")
    more: bool
    resume: str = Field(
        description="Once `more` is false: the feed cursor (`<dataset>:<at>`) to read on from."
    )
    low_water: int


def _change_out(c: Change) -> ChangeOut:
    return ChangeOut(
        seq=c.seq,
        cabinet_id=c.cabinet_id,
        key=c.key,
        op=c.op,
        deleted=c.deleted,
        changed_at=c.changed_at,
        data=c.data,
    )


def change_page_out(dataset: str, page: ChangePage) -> ChangePageOut:
    """A feed page as the API shows it."""
    return ChangePageOut(
        dataset=dataset,
        changes=[_change_out(c) for c in page.changes],
        next=page.next,
        cursor=cursor_token(dataset, page.next),
        more=page.more,
        low_water=page.low_water,
    )


def snapshot_page_out(page: SnapshotPage) -> SnapshotPageOut:
    """A snapshot page as the API shows it."""
    return SnapshotPageOut(
        dataset=page.dataset,
        at=page.at,
        changes=[_change_out(c) for c in page.changes],
        next=page.next,
        more=page.more,
        resume=page.resume,
        low_water=page.low_water,
    )


def cabinet_out(cabinet: Cabinet | CabinetOverview) -> CabinetOut:
    """A cabinet (or its overview, as the status reads it) as the API shows it."""
    return CabinetOut(
        id=cabinet.id,
        name=cabinet.name,
        seller_id=cabinet.seller_id,
        active=cabinet.active,
        created_at=cabinet.created_at,
    )


def at_ms(ms: float) -> datetime:
    """A wall-clock time in epoch milliseconds as an aware UTC datetime."""
    return datetime.fromtimestamp(ms / 1000.0, UTC)


def job_out(view: JobView) -> JobOut:
    """A job as the API shows it; a delayed job carries when it resumes and why it waits."""
    resume_at = resume_in = None
    if view.state == "delayed" and view.run_at_ms is not None:
        resume_at = at_ms(view.run_at_ms)
        resume_in = max(0, round(view.run_at_ms - clock.now_ms()))
    return JobOut(
        job_id=view.job_id,
        queue=view.queue,
        cabinet=view.cabinet,
        state=view.state,
        attempts_made=view.attempts_made,
        deferrals=int(view.data.get("deferrals", 0)),
        deferred_by=view.data.get("deferred_by"),
        resume_at=resume_at,
        resume_in_ms=resume_in,
        cursor=view.data.get("cursor"),
        failed_reason=view.failed_reason,
        created_at=at_ms(view.created_ms) if view.created_ms is not None else None,
        failed_at=(
            at_ms(view.finished_ms)
            if view.state == "failed" and view.finished_ms is not None
            else None
        ),
    )


def run_out(record: RunRecord) -> RunOut:
    """A (cabinet, sync)'s last runs as the API shows them."""
    return RunOut(
        queue=record.sync,
        success_at=record.success_at,
        success_pages=record.success_pages,
        success_rows=record.success_rows,
        failure_at=record.failure_at,
        failure_reason=record.failure_reason,
        failure_attempts=record.failure_attempts,
        loaded=record.sync in SYNCS,
    )


class CheckLimitOut(BaseModel):
    """A method's limit for the token's type, WB's numbers (unscaled)."""

    period_s: float
    limit: int
    burst: int


class CheckSectionOut(BaseModel):
    """WB's ``/ping`` on one section's host with the cabinet's token."""

    section: str
    host: str
    status: Literal["ok", "refused", "unreachable", "unchecked"]
    reachable: bool
    accepted: bool | None
    category: str | None
    category_granted: bool
    http_status: int | None
    words: str | None = Field(description="What WB said (or why nothing was sent).")
    limits: dict[str, CheckLimitOut | None] = Field(
        description="Each method the syncs call there: its limit, null when the type may not."
    )


class CheckSellerOut(BaseModel):
    """WB's seller information against the seller the cabinet claims."""

    status: Literal["confirmed", "mismatch", "refused", "unreachable", "unchecked"]
    claimed_seller_id: str
    seller_id: str | None
    name: str | None
    words: str | None


class CheckTokenOut(BaseModel):
    """The token's claims: type and expiry."""

    type: str
    expires_at: datetime
    expires_in_days: int
    expired: bool
    expiring_soon: bool


class CheckCabinetOut(BaseModel):
    """Which cabinet."""

    id: int | None
    name: str


class CabinetCheckOut(BaseModel):
    """A cabinet's token checked with WB (the shape of ``wbsync cabinets check --json``)."""

    cabinet: CheckCabinetOut
    ok: bool
    token: CheckTokenOut
    seller: CheckSellerOut
    sections: list[CheckSectionOut]
