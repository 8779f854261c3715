"""WB's penalties in force as the API shows them."""

from __future__ import annotations

import math
from datetime import datetime

from pydantic import BaseModel, Field

from wbsync.api.schemas.cabinets import CabinetOut
from wbsync.api.schemas.jobs import at_ms
from wbsync.ratelimit import GLOBAL_GROUP, Penalty

__all__ = ["PenaltyOut", "penalty_out"]


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
