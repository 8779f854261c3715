"""The change feed of the synced datasets (a cabinet's, and the whole fleet's) and its resync.

Keyset paging on the change sequence number: ``after`` is the ``cursor`` (or ``next``) of the
page before (0 to start); a page holds at most ``limit`` changes in ``seq`` order; ``more`` says
another page follows at once; ``low_water`` is the lowest ``after`` the feed is still complete
from. A reader that keeps its cursor never misses a change and never reads one twice
(docs/data.md). An empty, malformed, future or other dataset's cursor is a 422 naming ``after``
and the reason; one below the low-water mark is a 410 naming the mark and the snapshot route,
which serves a consistent snapshot of the live rows to read the feed on from. A removed
cabinet's feed answers until its tombstones are pruned.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from wbsync.api.deps import FeedCabinetDep, RuntimeDep
from wbsync.api.problems import Problem, problems
from wbsync.api.schemas import (
    ChangePageOut,
    SnapshotPageOut,
    change_page_out,
    snapshot_page_out,
)
from wbsync.errors import FeedCursorError, FeedCursorGoneError
from wbsync.shared.runtime import Runtime
from wbsync.store import DATASETS, Dataset
from wbsync.store.changes import CURSOR_MAX_CHARS, FEED_PAGE_MAX

__all__ = ["FEED_PAGE_DEFAULT", "router"]

#: Changes per page when the request gives no ``limit``.
FEED_PAGE_DEFAULT = 500

router = APIRouter(tags=["datasets"], responses=problems(401, 404, 410, 422, 503))

DatasetName = Annotated[str, Path(max_length=100, description="A dataset's name, e.g. stocks.")]
After = Annotated[
    str,
    Query(
        max_length=CURSOR_MAX_CHARS,
        description="Where to read on from: the previous page's `cursor` (the token "
        "`<dataset>:<seq>`, recommended: another dataset's is refused) or its `next` (a bare "
        "sequence number); 0 (the default) to read from the beginning, for a reader holding "
        "nothing. Refused with 422: an empty value, anything else that is not one of these, "
        "another dataset's token, a number past the feed's end. Refused with 410: a number "
        "above 0 below the feed's `low_water` (resynchronise: docs/data.md).",
    ),
]
At = Annotated[
    str | None,
    Query(
        max_length=CURSOR_MAX_CHARS,
        description="The snapshot's sequence number: omit it on the first page, then send the "
        "`at` the first page gave with every page after it.",
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


def _refused(exc: FeedCursorError, ds: Dataset, field: str = "after") -> Problem:
    if isinstance(exc, FeedCursorGoneError):
        return Problem(
            410,
            "cursor-gone",
            "Cursor below the low-water mark",
            str(exc),
            low_water=exc.low_water,
            resync=f"/api/v1/datasets/{ds.name}/snapshot",
        )
    errors = [{"field": f"query.{field}", "message": str(exc), "reason": exc.reason}]
    return Problem(
        422,
        "invalid-request",
        "Invalid request",
        f"invalid: query.{field}: {exc}",
        errors=errors,
        reason=exc.reason,
    )


async def _page(
    runtime: Runtime, name: str, after: str, limit: int, cabinet_id: int | None
) -> ChangePageOut:
    ds = _dataset(name)
    try:
        page = await runtime.store.changes(ds, after=after, cabinet_id=cabinet_id, limit=limit)
    except FeedCursorError as exc:
        raise _refused(exc, ds) from None
    return change_page_out(ds.name, page)


async def _snapshot(
    runtime: Runtime, name: str, at: str | None, after: str, limit: int, cabinet_id: int | None
) -> SnapshotPageOut:
    ds = _dataset(name)
    try:
        page = await runtime.store.snapshot(
            ds, at=at, after=after, cabinet_id=cabinet_id, limit=limit
        )
    except FeedCursorError as exc:
        raise _refused(exc, ds) from None
    return snapshot_page_out(page)


@router.get("/api/v1/cabinets/{cabinet_id}/datasets/{name}", response_model=ChangePageOut)
async def cabinet_changes(
    cabinet: FeedCabinetDep,
    runtime: RuntimeDep,
    name: DatasetName,
    after: After = "0",
    limit: Limit = FEED_PAGE_DEFAULT,
) -> ChangePageOut:
    """The cabinet's changes of a dataset after ``after``: inserts, updates and deletes."""
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


@router.get("/api/v1/datasets/{name}/snapshot", response_model=SnapshotPageOut)
async def fleet_snapshot(
    runtime: RuntimeDep,
    name: DatasetName,
    at: At = None,
    after: After = "0",
    limit: Limit = FEED_PAGE_DEFAULT,
) -> SnapshotPageOut:
    """The live rows of every cabinet as of ``at``, in ``seq`` order: the resync's first half
    (then read the feed from ``resume``)."""
    return await _snapshot(runtime, name, at, after, limit, None)


@router.get(
    "/api/v1/cabinets/{cabinet_id}/datasets/{name}/snapshot", response_model=SnapshotPageOut
)
async def cabinet_snapshot(
    cabinet: FeedCabinetDep,
    runtime: RuntimeDep,
    name: DatasetName,
    at: At = None,
    after: After = "0",
    limit: Limit = FEED_PAGE_DEFAULT,
) -> SnapshotPageOut:
    """The cabinet's live rows as of ``at``, in ``seq`` order (then its feed from ``resume``)."""
    return await _snapshot(runtime, name, at, after, limit, cabinet.id)
