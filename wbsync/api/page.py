"""The status page at ``/``: a Jinja2 template (autoescaped) with a small script and stylesheet.

The server pages, searches and filters (query string ``q``, ``state``, ``sort``, ``page``); the
script only turns times into the viewer's local time, draws the throughput chart, asks before a
penalty is lifted or a suspension resumed and keeps the page fresh. A failed job's Retry button,
a penalty's Lift button and a suspension's Resume button post a bodiless form (same key, by
cookie). The key handling is in ``wbsync.api.auth``.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, FileSystemLoader

from wbsync.api.auth import (
    COOKIE,
    SESSION_TTL_S,
    caller_of,
    key_matches,
    new_session,
    require_page_key,
)
from wbsync.api.deps import RuntimeDep, StatusQueryDep, status_reader
from wbsync.api.problems import Problem
from wbsync.api.routes.cabinets import resume, retry_failed
from wbsync.api.routes.penalties import GroupPath, lift_or_problem
from wbsync.api.schemas.status import SORT_ORDERS, STATE_FILTERS, STATES, StatusOut, StatusQuery
from wbsync.cabinets.penalties import remaining_text
from wbsync.jobs.lag import LAG_WINDOW_S
from wbsync.store.schema import CABINET_ID_MAX
from wbsync.syncs import SYNCS

__all__ = ["PENALTY_CABINETS_SHOWN", "REFRESH_S", "router", "static_files"]

REFRESH_S = 5
PENALTY_CABINETS_SHOWN = 5
"""The cabinets a penalty's row names on the page (a seller may hold hundreds); the rest are
counted, and ``GET /api/v1/penalties`` lists them all."""
_HERE = Path(__file__).parent
_TEMPLATE = Environment(loader=FileSystemLoader(_HERE / "templates"), autoescape=True).get_template(
    "status.html"
)

router = APIRouter(tags=["status page"])


def static_files() -> StaticFiles:
    """The page's script and stylesheet (mounted at ``/static``)."""
    return StaticFiles(directory=_HERE / "static")


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
async def status_page(
    request: Request, query: StatusQueryDep, key: Annotated[str | None, Query()] = None
) -> Response:
    """The status page; ``?key=`` trades the key for a session cookie and redirects to ``/``."""
    if key is not None:
        if not key_matches(key, request.app.state.api_keys):
            raise Problem(401, "unauthorized", "Unauthorized", "that key is not valid")
        response = RedirectResponse("/", status_code=303, headers={"Cache-Control": "no-store"})
        response.set_cookie(
            COOKIE,
            new_session(key),
            max_age=SESSION_TTL_S,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
        return response
    require_page_key(request)
    page = await status_reader(request).read(query)
    html = page.rendered("html", lambda p: _TEMPLATE.render(_context(p, query)).encode())
    return HTMLResponse(html, headers={"Cache-Control": "no-store"})


@router.get("/status/throughput", include_in_schema=False)
async def throughput_for_page(request: Request) -> Response:
    """``/api/v1/throughput`` for the page's chart (the key as a header or the page's cookie)."""
    require_page_key(request)
    return Response(await status_reader(request).throughput(), media_type="application/json")


@router.post("/retry/{queue}/{cabinet_id}", include_in_schema=False)
async def retry_from_page(
    request: Request,
    runtime: RuntimeDep,
    query: StatusQueryDep,
    queue: Annotated[str, PathParam(max_length=100)],
    cabinet_id: Annotated[int, PathParam(ge=1, le=CABINET_ID_MAX)],
) -> Response:
    """The page's Retry button: retry the failed job, then back to the page it was on.

    The form sends no body (what to retry is in the path, the view to return to in the query
    string), so the cookie that authorizes the page is enough.
    """
    require_page_key(request)
    await retry_failed(runtime, await runtime.store.cabinets.get(cabinet_id), queue)
    status_reader(request).invalidate()
    return RedirectResponse(_link(query), status_code=303)


@router.post("/lift/{cabinet_id}/{group}", include_in_schema=False)
async def lift_from_page(
    request: Request,
    runtime: RuntimeDep,
    query: StatusQueryDep,
    cabinet_id: Annotated[int, PathParam(ge=1, le=CABINET_ID_MAX)],
    group: GroupPath,
) -> Response:
    """The page's Lift button: end a penalty (as ``DELETE /api/v1/penalties/...`` does, with
    its audit line), then back to the page it was on; a bodiless form, like Retry."""
    require_page_key(request)
    cabinet = await runtime.store.cabinets.get(cabinet_id)
    await lift_or_problem(runtime, cabinet, group, by=caller_of(request))
    status_reader(request).invalidate()
    return RedirectResponse(_link(query), status_code=303)


@router.post("/resume/{cabinet_id}", include_in_schema=False)
async def resume_from_page(
    request: Request,
    runtime: RuntimeDep,
    query: StatusQueryDep,
    cabinet_id: Annotated[int, PathParam(ge=1, le=CABINET_ID_MAX)],
    section: Annotated[str | None, Query(min_length=1, max_length=100)] = None,
) -> Response:
    """The page's Resume button of a suspension: lift the cabinet's suspensions (``section``:
    that section's only), as ``POST /api/v1/cabinets/{id}/resume`` does, then back to the page
    it was on; a bodiless form, like Retry."""
    require_page_key(request)
    cabinet = await runtime.store.cabinets.get(cabinet_id)
    await resume(runtime, cabinet, section, by=caller_of(request))
    status_reader(request).invalidate()
    return RedirectResponse(_link(query), status_code=303)


def _link(query: StatusQuery, **changes: Any) -> str:
    params = {
        "q": query.search,
        "state": query.state,
        "sort": query.sort,
        "page": query.page,
        "per_page": query.per_page,
        **changes,
    }
    return "/?" + urlencode({k: v for k, v in params.items() if v not in ("", None)})


def _ago(ms: float | None) -> str:
    if ms is None:
        return "?"
    if ms < 1000:
        return f"{ms:.0f} ms"
    seconds = ms / 1000
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _until(seconds: float) -> str:
    """A time left in days and hours past a day (a token's), else as a penalty's."""
    days, rest = divmod(int(seconds), 86400)
    return f"{days} d {rest // 3600} h" if days else remaining_text(seconds * 1000)


def _utc(at: datetime | None) -> str:
    return "—" if at is None else at.strftime("%Y-%m-%d %H:%M:%S UTC")


def _context(page: StatusOut, query: StatusQuery) -> dict[str, Any]:
    """What the template is given: the status model as it is, the query it answers, and the
    page's constants and formatters."""
    return {
        "page": page,
        "query": query,
        "refresh_s": REFRESH_S,
        "states": STATES,
        "state_filters": STATE_FILTERS,
        "sort_orders": SORT_ORDERS,
        "syncs": SYNCS,
        "lag_window_min": round(LAG_WINDOW_S / 60),
        "penalty_cabinets_shown": PENALTY_CABINETS_SHOWN,
        "prev_link": _link(query, page=query.page - 1) if query.page > 1 else None,
        "next_link": _link(query, page=query.page + 1) if query.page < page.pages else None,
        "back": _link(query).removeprefix("/"),
        "ago": _ago,
        "utc": _utc,
        "remaining": remaining_text,
        "until": _until,
    }
