"""What the API reads and writes: request bodies and replies, and the conversions into them,
grouped by route area (every name is importable from here too)."""

from __future__ import annotations

from wbsync.api.schemas.attention import AttentionOut, AttentionSuspensionOut, TokenExpiryOut
from wbsync.api.schemas.cabinets import (
    CabinetCheckOut,
    CabinetIn,
    CabinetOut,
    CabinetTokenOut,
    RenameIn,
    ResumeIn,
    ResumeOut,
    SuspensionOut,
    TokenIn,
    TriggerOut,
    cabinet_out,
)
from wbsync.api.schemas.feed import (
    ChangeOut,
    ChangePageOut,
    RowsOut,
    SnapshotPageOut,
    change_page_out,
    snapshot_page_out,
)
from wbsync.api.schemas.jobs import (
    BucketOut,
    JobOut,
    LearnedOut,
    LimitOut,
    RunOut,
    at_ms,
    job_out,
    run_out,
)
from wbsync.api.schemas.penalties import PenaltyOut, penalty_out
from wbsync.api.schemas.status import (
    CabinetBucketOut,
    CabinetJobOut,
    CabinetStatusOut,
    LagOut,
    StatusOut,
    StatusQuery,
    ThroughputOut,
)

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
    "LagOut",
    "LearnedOut",
    "LimitOut",
    "PenaltyOut",
    "RenameIn",
    "ResumeIn",
    "ResumeOut",
    "RowsOut",
    "RunOut",
    "SnapshotPageOut",
    "StatusOut",
    "StatusQuery",
    "SuspensionOut",
    "ThroughputOut",
    "TokenExpiryOut",
    "TokenIn",
    "TriggerOut",
    "at_ms",
    "cabinet_out",
    "change_page_out",
    "job_out",
    "penalty_out",
    "run_out",
    "snapshot_page_out",
]
