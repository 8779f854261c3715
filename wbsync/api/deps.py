"""Dependencies shared by the routers: the runtime and a cabinet looked up by id."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Query, Request

from wbsync.api.schemas.status import PER_PAGE_MAX, SortOrder, StateFilter, StatusQuery
from wbsync.api.status import StatusReader
from wbsync.shared.runtime import Runtime
from wbsync.store import Cabinet
from wbsync.store.schema import CABINET_ID_MAX

__all__ = [
    "CabinetDep",
    "FeedCabinetDep",
    "RuntimeDep",
    "StatusQueryDep",
    "get_cabinet",
    "get_feed_cabinet",
    "get_runtime",
    "status_query",
    "status_reader",
]


def get_runtime(request: Request) -> Runtime:
    """The runtime the app was created with."""
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


async def get_cabinet(
    runtime: RuntimeDep,
    cabinet_id: Annotated[int, Path(ge=1, le=CABINET_ID_MAX, description="The cabinet's id.")],
) -> Cabinet:
    """The cabinet of the path's id (404 via CabinetNotFoundError when there is none)."""
    return await runtime.store.cabinets.get(cabinet_id)


CabinetDep = Annotated[Cabinet, Depends(get_cabinet)]


async def get_feed_cabinet(
    runtime: Annotated[Runtime, Depends(get_runtime)],
    cabinet_id: Annotated[int, Path(ge=1, le=CABINET_ID_MAX)],
) -> Cabinet:
    """The cabinet of the path's id, a removed one too (its feed answers until its tombstones
    are pruned); 404 when there is none."""
    return await runtime.store.cabinets.get(cabinet_id, removed=True)


FeedCabinetDep = Annotated[Cabinet, Depends(get_feed_cabinet)]


def status_reader(request: Request) -> StatusReader:
    """The app's status reader (it holds the shared index)."""
    reader: StatusReader = request.app.state.status
    return reader


def status_query(
    q: Annotated[
        str, Query(max_length=200, description="Part of a cabinet's name, its id, or a seller id.")
    ] = "",
    state: Annotated[
        StateFilter,
        Query(
            description="Cabinets with a job in this state (idle: none); disabled-method: a sync "
            "last met a method WB switched off; learned-limit: a bucket follows a stricter limit "
            "learned from WB's replies; penalty: WB's penalty holds a bucket of its seller; "
            "needs-attention: suspended (WB refused it for good), or its token expired or expires "
            "within 14 days."
        ),
    ] = "all",
    sort: Annotated[
        SortOrder, Query(description="stuck: waiting longest for a success first.")
    ] = "stuck",
    page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
    per_page: Annotated[int, Query(ge=1, le=PER_PAGE_MAX)] = 50,
) -> StatusQuery:
    """A status read's search, filter, order and page, from the query string."""
    return StatusQuery(search=q, state=state, sort=sort, page=page, per_page=per_page)


StatusQueryDep = Annotated[StatusQuery, Depends(status_query)]
