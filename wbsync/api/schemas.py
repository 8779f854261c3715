"""What the API reads and writes: request bodies and replies, and the conversions into them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from wbsync import clock
from wbsync.jobs.queue import JobView
from wbsync.store import Cabinet

__all__ = [
    "BucketOut",
    "CabinetIn",
    "CabinetOut",
    "JobOut",
    "LimitOut",
    "RowsOut",
    "TriggerOut",
    "cabinet_out",
    "job_out",
]


class CabinetIn(BaseModel):
    """A new cabinet: a name of the caller's choice and the WB token (write-only)."""

    model_config = ConfigDict(extra="forbid")

    # Any text but NUL (PostgreSQL cannot store it), with at least one visible character.
    name: str = Field(min_length=1, max_length=200, pattern=r"^[^\x00]*[^\x00\s][^\x00]*$")
    token: str = Field(min_length=1, max_length=8192, repr=False)


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
    deferrals: int = Field(description="Times the job was moved to delayed by a rate limit.")
    deferred_by: str | None = Field(description="The limit group whose window it last waited.")
    resume_at: datetime | None = Field(description="For a delayed job: when it runs again.")
    resume_in_ms: int | None
    cursor: Any = None
    failed_reason: str | None = None


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


class BucketOut(BaseModel):
    """One shared bucket of a cabinet: tokens left, and when a token is next there."""

    group: str
    methods: list[str]
    limit: LimitOut
    tokens_left: int
    capacity: int
    next_token_in_ms: int = Field(description="0 when a token is there now.")
    next_token_at: datetime


class RowsOut(BaseModel):
    """Rows read from WB on demand."""

    rows: list[dict[str, Any]]
    next_offset: int | None = None


def cabinet_out(cabinet: Cabinet) -> CabinetOut:
    """A cabinet as the API shows it."""
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
    )
