"""The cabinets' bodies and replies: a cabinet, its token, its name, its suspensions, a trigger
and a token's check with WB."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from wbsync.store import Cabinet, CabinetOverview

__all__ = [
    "CabinetCheckOut",
    "CabinetIn",
    "CabinetOut",
    "CabinetTokenOut",
    "RenameIn",
    "ResumeIn",
    "ResumeOut",
    "SuspensionOut",
    "TokenIn",
    "TriggerOut",
    "cabinet_out",
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


def cabinet_out(cabinet: Cabinet | CabinetOverview) -> CabinetOut:
    """A cabinet (or its overview, as the status reads it) as the API shows it."""
    return CabinetOut(
        id=cabinet.id,
        name=cabinet.name,
        seller_id=cabinet.seller_id,
        active=cabinet.active,
        created_at=cabinet.created_at,
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
