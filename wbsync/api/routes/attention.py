"""What needs an operator: the cabinets and sections WB refuses, the tokens expired or expiring."""

from __future__ import annotations

from fastapi import APIRouter, Request

from wbsync.api.deps import status_reader
from wbsync.api.problems import problems
from wbsync.api.schemas import AttentionOut

__all__ = ["router"]

router = APIRouter(prefix="/api/v1/attention", tags=["attention"], responses=problems(401, 503))


@router.get("", response_model=AttentionOut)
async def list_attention(request: Request) -> AttentionOut:
    """Every suspension in force (the whole cabinets' first, then the oldest), with WB's words,
    since when and what lifts it, and every active cabinet's token expired or expiring within
    ``expiring_within_days``, the soonest first. Lift a suspension with ``POST
    /api/v1/cabinets/{id}/resume`` or a new token (``PUT /api/v1/cabinets/{id}/token``)."""
    return await status_reader(request).attention()
