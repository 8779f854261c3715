"""pricing-bulk: upload the cabinet's pending price targets, then refresh the goods price list.

A short queue, not wrapped by the reschedule service. Each uploaded batch is recorded and its
targets cleared before the next, so a retried run never uploads a batch twice.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from wbsync.store.ledger import PriceUpload
from wbsync.syncs.base import Sync, SyncInput, SyncPage
from wbsync.wb import methods

_BATCH = 1000  # WB takes at most 1000 items an upload


async def _upload(inp: SyncInput) -> AsyncIterator[SyncPage]:
    ledger = inp.store.ledger
    targets = await ledger.price_targets(inp.cabinet_id)
    for start in range(0, len(targets), _BATCH):
        batch = targets[start : start + _BATCH]
        items = [
            {
                k: v
                for k, v in (("nmID", t.nm_id), ("price", t.price), ("discount", t.discount))
                if v is not None
            }
            for t in batch
        ]
        task_id = await methods.upload_prices(inp.client, items)
        await ledger.record_price_upload(
            PriceUpload(inp.cabinet_id, task_id, len(items), {"data": items})
        )
        await ledger.clear_price_targets(inp.cabinet_id, [t.nm_id for t in batch])
        yield SyncPage.checkpoint({"uploaded": False})


async def pages(inp: SyncInput) -> AsyncIterator[SyncPage]:
    """Uploads first, then every page of the goods price list."""
    cursor = inp.cursor or {}
    if not cursor.get("uploaded"):
        async for page in _upload(inp):
            yield page
        cursor = {"uploaded": True, "offset": 0}
        yield SyncPage.checkpoint(cursor)
    async for goods in methods.goods(inp.client, offset=int(cursor.get("offset", 0))):
        yield SyncPage("prices", goods.rows, {"uploaded": True, "offset": goods.cursor})


SYNC = Sync(
    name="pricing-bulk",
    long=False,
    interval_s=15 * 60,
    datasets=("prices",),
    pages=pages,
)
