"""The change feed of the synced datasets: a cabinet's, and the whole fleet's.

Keyset paging on the change sequence number: ``after`` is the ``next`` of the page before (0 to
start); a page holds at most ``limit`` changes in ``seq`` order; ``more`` says another page
follows at once. A reader that keeps ``next`` never misses a change and never reads one twice
(docs/data.md). A malformed cursor, or one beyond the feed's end, is a 422 naming ``after``.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from wbsync.api.deps import CabinetDep, RuntimeDep
from wbsync.api.problems import Problem, problems
from wbsync.api.schemas import ChangePageOut, change_page_out
from wbsync.errors import FeedCursorError
from wbsync.runtime import Runtime
from wbsync.store import DATASETS, Dataset
from wbsync.store.changes import FEED_PAGE_MAX, parse_cursor

__all__ = ["FEED_PAGE_DEFAULT", "router"]

#: Changes per page when the request gives no ``limit``.
FEED_PAGE_DEFAULT = 500

router = APIRouter(tags=["datasets"], responses=problems(401, 404, 422, 503))

DatasetName = Annotated[str, Path(max_length=100, description="A dataset's name, e.g. stocks.")]
After = Annotated[
    str,
    Query(
        max_length=20,
        description="The sequence number of the last change already read (the previous page's "
        "`next`); 0 or empty to start from the beginning.",
    ),
]
Limit = Annotated[int, Query(ge=1, le=FEED_PAGE_MAX, description="Changes per page at most.")]


def _dataset(name: str) -> Dataset:
    try:
        return DATASETS[name]
    except KeyError:
        known = ", ".join(sorted(DATASETS))
        raise Problem(
            404, "not-found", "Not found", f"no dataset {name!r}; known: {known}"
        ) from None


async def _page(
    runtime: Runtime, name: str, after: str, limit: int, cabinet_id: int | None
) -> ChangePageOut:
    ds = _dataset(name)
    try:
        page = await runtime.store.changes(
            ds, after=parse_cursor(after), cabinet_id=cabinet_id, limit=limit
        )
    except FeedCursorError as exc:
        errors = [{"field": "query.after", "message": str(exc)}]
        raise Problem(
            422, "invalid-request", "Invalid request", f"invalid: query.after: {exc}", errors=errors
        ) from None
    return change_page_out(ds.name, page)


@router.get("/api/v1/cabinets/{cabinet_id}/datasets/{name}", response_model=ChangePageOut)
async def cabinet_changes(
    cabinet: CabinetDep,
    runtime: RuntimeDep,
    name: DatasetName,
    after: After = "0",
    limit: Limit = FEED_PAGE_DEFAULT,
) -> ChangePageOut:
    """The cabinet's changes of a dataset after ``after``: inserts, updates and tombstones."""
    return await _page(runtime, name, after, limit, cabinet.id)


@router.get("/api/v1/datasets/{name}/changes", response_model=ChangePageOut)
async def fleet_changes(
    runtime: RuntimeDep,
    name: DatasetName,
    after: After = "0",
    limit: Limit = FEED_PAGE_DEFAULT,
) -> ChangePageOut:
    """Every cabinet's changes of a dataset after ``after``, in one order."""
    return await _page(runtime, name, after, limit, None)
