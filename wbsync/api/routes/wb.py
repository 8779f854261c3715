"""On-demand WB reads a UI calls directly, on the no-context path of the client.

Outside a job the limiter sleeps a short wait in place and refuses a wait past its ceiling
(two windows plus a margin) with ``RateLimitExceeded``, which becomes 429 with ``Retry-After``;
nothing is sent to WB then. WB's own errors map as ``wbsync.api.problems`` says.
"""

from __future__ import annotations

import contextlib
from enum import IntEnum
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import Field

from wbsync.api.deps import CabinetDep, RuntimeDep
from wbsync.api.problems import problems
from wbsync.api.schemas import RowsOut
from wbsync.wb import methods

__all__ = ["router"]

router = APIRouter(
    prefix="/api/v1/cabinets/{cabinet_id}/wb",
    tags=["wb"],
    responses=problems(401, 404, 409, 422, 429, 502, 503, 504),
)

# What WB's filters take: warehouse ids are positive 64-bit integers; a campaign status is one of
# WB's documented codes. Anything else is the caller's mistake (422), never sent on to WB.
WarehouseId = Annotated[int, Field(ge=1, le=2**63 - 1)]
OFFSET_MAX = 2**31 - 1


class AdvertStatus(IntEnum):
    """WB's campaign status codes, the only values its status filter takes."""

    DELETED = -1
    READY = 4
    COMPLETED = 7
    DECLINED = 8
    ACTIVE = 9
    PAUSED = 11


@router.get("/acceptance-coefficients", response_model=RowsOut)
async def acceptance_coefficients(
    cabinet: CabinetDep,
    runtime: RuntimeDep,
    warehouse_id: Annotated[list[WarehouseId] | None, Query(max_length=100)] = None,
) -> RowsOut:
    """Acceptance coefficients (free supply slots), optionally of some warehouses."""
    rows = await methods.acceptance_coefficients(
        runtime.client(cabinet), warehouse_ids=warehouse_id or ()
    )
    return RowsOut(rows=rows)


@router.get("/goods", response_model=RowsOut)
async def goods(
    cabinet: CabinetDep,
    runtime: RuntimeDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=OFFSET_MAX)] = 0,
) -> RowsOut:
    """One page of goods with their prices; ``next_offset`` is None after the last page."""
    pages = methods.goods(runtime.client(cabinet), limit=limit, offset=offset)
    with contextlib.suppress(StopAsyncIteration):
        page = await anext(pages)
        await pages.aclose()  # type: ignore[attr-defined]
        return RowsOut(rows=page.rows, next_offset=page.cursor if len(page.rows) == limit else None)
    return RowsOut(rows=[], next_offset=None)


@router.get("/adverts", response_model=RowsOut)
async def adverts(
    cabinet: CabinetDep,
    runtime: RuntimeDep,
    status: Annotated[
        list[AdvertStatus] | None,
        Query(max_length=20, description="WB's campaign status codes: -1, 4, 7, 8, 9, 11."),
    ] = None,
    payment_type: Annotated[str | None, Query(pattern="^(cpm|cpc)$")] = None,
) -> RowsOut:
    """The cabinet's advert campaigns, optionally filtered by status and payment type."""
    rows = await methods.adverts(
        runtime.client(cabinet), statuses=[int(s) for s in status or ()], payment_type=payment_type
    )
    return RowsOut(rows=rows)
