"""What needs an operator: suspensions in force, tokens expired or expiring."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from wbsync.api.schemas.cabinets import SuspensionOut

__all__ = ["AttentionOut", "AttentionSuspensionOut", "TokenExpiryOut"]


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
