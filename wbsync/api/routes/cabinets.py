"""Cabinets: create, list, show, deactivate; their live jobs, sync triggers, retries, buckets."""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, Path, Request
from fastapi.responses import JSONResponse

from wbsync.api.auth import caller_of
from wbsync.api.deps import CabinetDep, RuntimeDep, status_reader
from wbsync.api.live import cabinet_buckets, cabinet_jobs
from wbsync.api.problems import Problem, problems
from wbsync.api.schemas import (
    BucketOut,
    CabinetCheckOut,
    CabinetIn,
    CabinetOut,
    CabinetTokenOut,
    JobOut,
    RenameIn,
    ResumeIn,
    ResumeOut,
    SuspensionOut,
    TokenIn,
    TriggerOut,
    cabinet_out,
)
from wbsync.cabinets import suspending
from wbsync.cabinets.cabinet_check import check_cabinet
from wbsync.errors import CabinetNotFoundError, StoreError, TokenError
from wbsync.jobs.contract import FLEET_JOB
from wbsync.jobs.model import job_id
from wbsync.shared.runtime import Runtime
from wbsync.store import Cabinet
from wbsync.syncs import SYNCS, unserved_queues
from wbsync.wb.tokens import WbToken, parse_token

__all__ = ["resume", "retry_failed", "router"]

log = logging.getLogger(__name__)

router = APIRouter(
    prefix="/api/v1/cabinets",
    tags=["cabinets"],
    responses=problems(401, 404, 409, 413, 422, 503),
)


def _invalid_token(exc: TokenError) -> Problem:
    # TokenError never carries the token itself, so its message is safe to send back.
    errors = [{"field": "body.token", "message": str(exc)}]
    return Problem(422, "invalid-request", "Invalid request", "invalid: body.token", errors=errors)


@router.post("", status_code=201, response_model=CabinetTokenOut)
async def create_cabinet(body: CabinetIn, runtime: RuntimeDep) -> CabinetTokenOut:
    """Store a cabinet and its WB token (encrypted); the token is never returned.

    ``unserved`` names the queues the token cannot serve (the fan-out skips them), with why.
    """
    token = body.token.strip()
    try:
        parsed = parse_token(token, cabinet=body.name)
    except TokenError as exc:
        raise _invalid_token(exc) from None
    try:
        cabinet = await runtime.store.cabinets.add(
            body.name, token, parsed.seller_id, token_expires_at=parsed.expires_at
        )
    except StoreError:
        if await _exists(runtime, body.name):
            raise Problem(
                409, "conflict", "Conflict", f"a cabinet named {body.name!r} already exists"
            ) from None
        raise
    log.info("cabinet created", extra={"cabinet": str(cabinet.id)})
    return _with_gaps(cabinet, parsed)


def _with_gaps(cabinet: Cabinet, token: WbToken) -> CabinetTokenOut:
    return CabinetTokenOut(**cabinet_out(cabinet).model_dump(), unserved=unserved_queues(token))


@router.put("/{cabinet_id}/token", response_model=CabinetTokenOut)
async def replace_token(body: TokenIn, cabinet: CabinetDep, runtime: RuntimeDep) -> CabinetTokenOut:
    """Replace the cabinet's token (same seller); its rows, cursors and runs stay."""
    token = body.token.strip()
    try:
        parsed = parse_token(token, cabinet=cabinet.name)
    except TokenError as exc:
        raise _invalid_token(exc) from None
    if parsed.seller_id != cabinet.seller_id:
        raise Problem(
            409,
            "other-seller",
            "Conflict",
            f"the token is for seller {parsed.seller_id}, cabinet {cabinet.id} is seller "
            f"{cabinet.seller_id}; add it as a new cabinet instead",
        )
    done = await runtime.store.cabinets.replace_token(
        cabinet.id, token, parsed.seller_id, token_expires_at=parsed.expires_at
    )
    log.info("cabinet token replaced", extra={"cabinet": str(cabinet.id)})
    return _with_gaps(done, parsed)


@router.post("/{cabinet_id}/check", response_model=CabinetCheckOut)
async def check_token(cabinet: CabinetDep, runtime: RuntimeDep) -> CabinetCheckOut:
    """Check the cabinet's token with WB: each used section's ``/ping`` and the seller
    information, through the shared buckets. ``ok`` false: see each section's ``status``."""
    result = await check_cabinet(runtime, cabinet)
    log.info("cabinet token checked", extra={"cabinet": str(cabinet.id)})
    return CabinetCheckOut.model_validate(result.as_dict())


@router.post("/{cabinet_id}/resume", response_model=ResumeOut)
async def resume_cabinet(
    request: Request, cabinet: CabinetDep, runtime: RuntimeDep, body: ResumeIn | None = None
) -> ResumeOut:
    """Lift the cabinet's suspensions (what WB refused for good; docs/failures.md): all of
    them, or one section's with ``{"section": ...}``. The fan-out feeds it again at its next
    read; each job continues from its cursor. ``lifted`` lists what was lifted."""
    section = body.section if body is not None else None
    resumed = await resume(runtime, cabinet, section, by=caller_of(request))
    status_reader(request).invalidate()
    return resumed


async def resume(runtime: Runtime, cabinet: Cabinet, section: str | None, *, by: str) -> ResumeOut:
    """Lift the cabinet's suspensions, all or one section's, with the audit line naming ``by``
    (the route's and the status page's Resume button)."""
    lifted = await suspending.resume(runtime.store, cabinet, section, by=by)
    return ResumeOut(
        id=cabinet.id,
        name=cabinet.name,
        lifted=[
            SuspensionOut(
                section=s.section,
                kind=s.kind,
                words=s.words,
                since=s.since,
                probe_at=s.probe_at,
            )
            for s in lifted
        ],
    )


@router.post("/{cabinet_id}/activate", response_model=CabinetOut)
async def activate_cabinet(cabinet: CabinetDep, runtime: RuntimeDep) -> CabinetOut:
    """Sync a deactivated cabinet again."""
    done = await runtime.store.cabinets.set_active(cabinet.id, True)
    log.info("cabinet activated", extra={"cabinet": str(cabinet.id)})
    return cabinet_out(done)


@router.post("/{cabinet_id}/rename", response_model=CabinetOut)
async def rename_cabinet(body: RenameIn, cabinet: CabinetDep, runtime: RuntimeDep) -> CabinetOut:
    """Give the cabinet a new name (409 when another cabinet has it)."""
    if body.name != cabinet.name and await _exists(runtime, body.name):
        raise Problem(409, "conflict", "Conflict", f"a cabinet named {body.name!r} already exists")
    if body.name == cabinet.name:
        return cabinet_out(cabinet)
    done = await runtime.store.cabinets.rename(cabinet.id, body.name)
    log.info("cabinet renamed", extra={"cabinet": str(cabinet.id)})
    return cabinet_out(done)


async def _exists(runtime: RuntimeDep, name: str) -> bool:
    try:
        await runtime.store.cabinets.get(name)
    except CabinetNotFoundError:
        return False
    return True


@router.get("", response_model=list[CabinetOut])
async def list_cabinets(runtime: RuntimeDep) -> list[CabinetOut]:
    """Every cabinet, by id."""
    return [cabinet_out(c) for c in await runtime.store.cabinets.list()]


@router.get("/{cabinet_id}", response_model=CabinetOut)
async def show_cabinet(cabinet: CabinetDep) -> CabinetOut:
    """One cabinet."""
    return cabinet_out(cabinet)


@router.post("/{cabinet_id}/deactivate", response_model=CabinetOut)
async def deactivate_cabinet(cabinet: CabinetDep, runtime: RuntimeDep) -> CabinetOut:
    """Stop syncing the cabinet (its data stays; live jobs finish as no-ops)."""
    done = await runtime.store.cabinets.deactivate(cabinet.id)
    log.info("cabinet deactivated", extra={"cabinet": str(cabinet.id)})
    return cabinet_out(done)


@router.get("/{cabinet_id}/jobs", response_model=list[JobOut])
async def live_jobs(cabinet: CabinetDep, runtime: RuntimeDep) -> list[JobOut]:
    """The cabinet's live jobs over every queue; delayed ones say when and why they wait."""
    return await cabinet_jobs(runtime, cabinet.id)


@router.post(
    "/{cabinet_id}/syncs/{queue}",
    status_code=202,
    response_model=TriggerOut,
)
async def trigger_sync(
    cabinet: CabinetDep,
    runtime: RuntimeDep,
    queue: Annotated[str, Path(description="One of the sync queues, e.g. rnp-finance-sync.")],
) -> JSONResponse:
    """Run (queue, cabinet) now: 202 with the job id, or 409 naming the live job. A fleet-wide
    queue's one job is the fleet's (``cabinet`` ``fleet``): it runs now, carried by a cabinet
    that may ask (docs/data.md, "Fleet-wide datasets")."""
    _known_queue(queue)
    if not cabinet.active:
        raise Problem(409, "cabinet-inactive", "Conflict", f"cabinet {cabinet.id} is inactive")
    ref = FLEET_JOB if SYNCS[queue].fleet else str(cabinet.id)
    result = await runtime.queue(queue).enqueue(ref)
    context = {"cabinet": ref, "queue": queue, "job_id": result.job_id}
    if not result.added:
        log.info("trigger refused: job is live (%s)", result.state, extra=context)
        whose = "the fleet" if ref == FLEET_JOB else f"cabinet {cabinet.id}"
        raise Problem(
            409,
            "job-live",
            "Conflict",
            f"{whose} already has a live job {result.job_id} ({result.state})",
            job_id=result.job_id,
            job_state=result.state,
        )
    log.info("sync triggered", extra=context)
    out = TriggerOut(job_id=result.job_id, queue=queue, cabinet=ref, state=result.state)
    return JSONResponse(out.model_dump(), status_code=202)


@router.post(
    "/{cabinet_id}/syncs/{queue}/retry",
    status_code=202,
    response_model=TriggerOut,
    responses={409: {"description": "The cabinet's job in this queue has not failed."}},
)
async def retry_sync(
    request: Request,
    cabinet: CabinetDep,
    runtime: RuntimeDep,
    queue: Annotated[str, Path(description="One of the sync queues, e.g. rnp-finance-sync.")],
) -> JSONResponse:
    """Run the cabinet's failed job of this queue again, from its cursor, with fresh attempts."""
    out = await retry_failed(runtime, cabinet, queue)
    status_reader(request).invalidate()
    return JSONResponse(out.model_dump(), status_code=202)


async def retry_failed(runtime: Runtime, cabinet: Cabinet, queue: str) -> TriggerOut:
    """Move (queue, cabinet)'s failed job back to waiting; Problem 404/409 when it cannot."""
    _known_queue(queue)
    before = await runtime.queue(queue).retry(str(cabinet.id))
    jid = job_id(queue, str(cabinet.id))
    context = {"cabinet": str(cabinet.id), "queue": queue, "job_id": jid}
    if before == "missing":
        raise Problem(404, "not-found", "Not found", f"cabinet {cabinet.id} has no job in {queue}")
    if before != "failed":
        raise Problem(
            409,
            "job-not-failed",
            "Conflict",
            f"job {jid} is {before}, not failed; only a failed job can be retried",
            job_id=jid,
            job_state=before,
        )
    log.info("failed job retried", extra=context)
    return TriggerOut(job_id=jid, queue=queue, cabinet=str(cabinet.id), state="waiting")


def _known_queue(queue: str) -> None:
    if queue not in SYNCS:
        raise Problem(
            404, "not-found", "Not found", f"no queue {queue!r}; queues: {', '.join(SYNCS)}"
        )


@router.get("/{cabinet_id}/buckets", response_model=list[BucketOut])
async def buckets(cabinet: CabinetDep, runtime: RuntimeDep) -> list[BucketOut]:
    """Per limit group: tokens left and when the next one is there (no token is taken)."""
    return await cabinet_buckets(runtime, cabinet)
