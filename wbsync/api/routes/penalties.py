"""WB's penalties: every one in force, and lifting one by hand (an audit line says who)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request

from wbsync.api.auth import caller_of
from wbsync.api.deps import CabinetDep, RuntimeDep, status_reader
from wbsync.api.problems import Problem, problems
from wbsync.api.schemas import PenaltyOut, cabinet_out, penalty_out
from wbsync.cabinets import penalties
from wbsync.ratelimit import Penalty
from wbsync.shared.runtime import Runtime
from wbsync.store import Cabinet

__all__ = ["GroupPath", "lift_or_problem", "router"]

router = APIRouter(prefix="/api/v1/penalties", tags=["penalties"], responses=problems(401, 503))

GroupPath = Annotated[
    str,
    Path(
        max_length=100,
        description="A limit group (e.g. finance.detailed_report), or the seller's global limiter.",
    ),
]


@router.get("", response_model=list[PenaltyOut])
async def list_penalties(request: Request) -> list[PenaltyOut]:
    """Every penalty WB gave that is in force now, the longest first, with the cabinets of its
    seller (none when no stored cabinet has that seller)."""
    return await status_reader(request).penalties()


@router.delete("/{cabinet_id}/{group}", response_model=PenaltyOut, responses=problems(404, 422))
async def lift_penalty(
    request: Request, cabinet: CabinetDep, runtime: RuntimeDep, group: GroupPath
) -> PenaltyOut:
    """End the penalty of the cabinet's seller on ``group`` for every process (every cabinet
    of that seller is freed); the reply is the penalty as it was, with the time that remained
    (its ``cabinets``: the cabinet named).

    404 when there is no such cabinet or no penalty in force on the group; 422 for a group there
    is not.
    """
    lifted = await lift_or_problem(runtime, cabinet, group, by=caller_of(request))
    status_reader(request).invalidate()
    # As it was when lifted: its remaining time is the one the limiter read then.
    return penalty_out(lifted, [cabinet_out(cabinet)], lifted.until_ms - lifted.remaining_ms)


async def lift_or_problem(runtime: Runtime, cabinet: Cabinet, group: str, *, by: str) -> Penalty:
    """Lift the penalty of the cabinet's seller on ``group`` (audit line naming ``by``);
    Problem 422 for a group there is not, 404 when no penalty is in force there."""
    try:
        lifted = await penalties.lift(runtime.limiter, cabinet, group, by=by)
    except penalties.GroupUnknown as exc:
        errors = [{"field": "path.group", "message": str(exc)}]
        raise Problem(
            422, "invalid-request", "Invalid request", "invalid: path.group", errors=errors
        ) from None
    if lifted is None:
        raise Problem(
            404,
            "no-penalty",
            "Not found",
            f"cabinet {cabinet.id} {cabinet.name!r} (seller {cabinet.seller_id}) has no penalty "
            f"in force on {group}",
        )
    return lifted
