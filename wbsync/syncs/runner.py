"""Runs a sync: stores each page, then saves its cursor, page after page."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from wbsync.syncs.base import Sync, SyncInput, SyncPage

log = logging.getLogger(__name__)

PageListener = Callable[[SyncPage], Awaitable[None]]


@dataclass(slots=True)
class SyncTotals:
    """What one run did: pages fetched and rows written."""

    pages: int = 0
    rows: int = 0


async def run_sync(
    sync: Sync, inp: SyncInput, *, on_page: PageListener | None = None
) -> SyncTotals:
    """Run ``sync`` from ``inp.cursor`` to the end; a cursor not of the sync's shape is refused
    (``MalformedJobError``) before anything is fetched.

    After each page: rows upserted, then (for an incremental sync) the cursor saved in
    ``wb_sync_cursors``, where its next run goes on from, then ``on_page`` (the job layer saves
    the cursor in the job, where a resumed run of the same job goes on from). Other syncs have no
    row in that table: every new run starts from the beginning.
    """
    sync.check_cursor(inp.cursor)
    totals = SyncTotals()
    cursors = inp.store.cursors
    async for page in sync.pages(inp):
        if page.dataset is not None:
            totals.pages += 1
            if page.rows:
                totals.rows += await inp.store.upsert(page.dataset, inp.cabinet_id, page.rows)
        if sync.incremental:
            await cursors.save(inp.cabinet_id, sync.name, page.cursor)
        if on_page is not None:
            await on_page(page)
    log.info("%s done: %d pages, %d rows", sync.name, totals.pages, totals.rows)
    return totals
