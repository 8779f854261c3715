"""Runs a sync: stores each page, then saves its cursor, page after page."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from wbsync.store.changes import ChangeEvent
from wbsync.store.datasets import dataset
from wbsync.syncs.base import Sync, SyncInput, SyncPage

log = logging.getLogger(__name__)

PageListener = Callable[[SyncPage, ChangeEvent | None], Awaitable[None]]
"""Told of each stored page with its change event (None when no row changed)."""


@dataclass(slots=True)
class SyncTotals:
    """What one run did: pages fetched, rows written (changed), rows tombstoned, and rows
    fetched (every row WB sent, written or not: most are unchanged and not written)."""

    pages: int = 0
    rows: int = 0
    tombstoned: int = 0
    fetched: int = 0


async def run_sync(
    sync: Sync,
    inp: SyncInput,
    *,
    on_page: PageListener | None = None,
    announce: bool = True,
    totals: SyncTotals | None = None,
) -> SyncTotals:
    """Run ``sync`` from ``inp.cursor`` to the end; a cursor not of the sync's shape is refused
    (``MalformedJobError``) before anything is fetched.

    After each page: rows upserted and (for an incremental sync) the cursor saved in
    ``wb_sync_cursors``, where its next run goes on from, in one transaction; then ``on_page``
    (the job layer saves the cursor in the job, where a resumed run of the same job goes on
    from), with the page's change event. Other syncs have no row in that table: every new run
    starts from the beginning. With ``announce`` False the store does not tell its listeners of
    the page's change event: the caller sends it (the job layer, in the call that saves the
    job's cursor: one round trip).

    ``totals``: what the run's earlier slices did (a run resumed after a deferral), continued
    in place, so ``on_page`` reads the whole run's counts and the log line at the end counts
    the whole run, not the last slice.

    Datasets of kind ``"snapshot"``: a run starting from no cursor begins a snapshot run, each
    page's keys are recorded as seen, and a run that reaches the end tombstones the rows it did
    not see. A run that raises (a failure, or a deferral that a later run of the same job
    resumes from its cursor) tombstones nothing. A sync storing one snapshot dataset whose run
    (from no cursor) begins with a ``whole`` page needs none of that: the page's write
    tombstones the rows it lacks, and no snapshot run is begun or completed.

    A fleet-wide sync (``Sync.fleet``) stores its rows with no cabinet (``inp.cabinet_id`` is
    only the cabinet whose token carries the run); it keeps no snapshot run: its whole pages
    replace its snapshot datasets, any page of theirs that is not whole only adds and updates.
    """
    sync.check_cursor(inp.cursor)
    totals = SyncTotals() if totals is None else totals
    store = inp.store
    cabinet = None if sync.fleet else inp.cabinet_id
    snapshots = [ds for ds in sync.stores if ds.kind == "snapshot" and not ds.fleet]
    # A sync storing one dataset, a snapshot, begins its run with its first stored page (on
    # PostgreSQL in the page's statement: a statement fewer a run). The run is begun before
    # the first page's ``on_page`` either way: that saves the job's cursor, and a run resumed
    # from a cursor begins nothing. With more datasets every snapshot run begins first.
    unbegun = None
    if inp.cursor is None and len(sync.stores) == 1 and snapshots:
        unbegun = snapshots[0]
    elif inp.cursor is None and cabinet is not None:
        for ds in snapshots:
            await store.snapshots.begin(ds, cabinet)
    replaced = set()  # snapshot datasets a whole page replaced: no snapshot run to complete
    async for page in sync.pages(inp):
        # An incremental sync's cursor is saved in the page's own transaction.
        cursor = (sync.name, page.cursor) if sync.incremental else None
        if page.dataset is not None:
            totals.pages += 1
            totals.fetched += len(page.rows)
        event: ChangeEvent | None = None
        into = None if page.dataset is None else dataset(page.dataset)
        whole = page.whole and into is not None and (into == unbegun or into.fleet)
        if into is not None and (page.rows or whole):
            written = await store.write(
                into,
                cabinet,
                page.rows,
                seen=into.kind == "snapshot" and not whole and not into.fleet,
                cursor=cursor,
                announce=announce,
                begin=into == unbegun and not whole,
                whole=whole,
            )
            if into == unbegun:
                unbegun = None
            if whole:
                replaced.add(into)
            totals.rows += written.changed
            totals.tombstoned += written.tombstoned
            event = written.event
        elif cursor is not None and cabinet is not None:
            await store.cursors.save(cabinet, *cursor)
        if unbegun is not None and cabinet is not None:
            await store.snapshots.begin(unbegun, cabinet)
            unbegun = None
        if on_page is not None:
            await on_page(page, event)
    if unbegun is not None and cabinet is not None:  # no page at all: the run saw nothing
        await store.snapshots.begin(unbegun, cabinet)
    for ds in snapshots:
        if ds not in replaced and cabinet is not None:
            totals.tombstoned += await store.snapshots.complete(ds, cabinet)
    log.info(
        "%s done: %d pages, %d rows fetched, %d rows written, %d tombstoned",
        sync.name,
        totals.pages,
        totals.fetched,
        totals.rows,
        totals.tombstoned,
    )
    return totals
