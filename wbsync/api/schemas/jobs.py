"""Jobs, the last runs of a cabinet's syncs and its buckets as the API shows them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

from wbsync.jobs.views import JobView
from wbsync.store import RunRecord
from wbsync.syncs import SYNCS
from wbsync.system import clock

__all__ = [
    "BucketOut",
    "JobOut",
    "LearnedOut",
    "LimitOut",
    "RunOut",
    "at_ms",
    "job_out",
    "run_out",
]


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
