"""pricing-bulk: upload the cabinet's pending price targets, then refresh the goods price list.

A short queue, not wrapped by the reschedule service. Each batch is recorded in the ledger as an
intent before it is sent, then with WB's task id, and its targets are cleared before the next
batch: a retried run never uploads a sent batch twice. If the process dies after sending, before
the targets are cleared, the next run sends the same batch again; WB recognizes a repeated upload
(208, the first task's id) and the ledger finishes the intent it already holds.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from wbsync.store.datasets import Dataset, KeyField
from wbsync.syncs.base import Count, CursorShape, Flag, Sync, SyncInput, SyncPage, optional
from wbsync.wb.client import WbClient
from wbsync.wb.endpoints import Endpoint
from wbsync.wb.methods import PRICES_GOODS_LIST, goods
from wbsync.wb.paging import Row, bad_reply
from wbsync.wb.sections import PRICES, PRICES_LIMITS
from wbsync.wb.tokens import Category

_BATCH = 1000  # WB takes at most 1000 items an upload


PRICES_UPLOAD_TASK = Endpoint(
    name="prices.upload_task",
    section=PRICES,
    method="POST",
    path="/api/v2/upload/task",
    group="prices",
    category=Category.PRICES,
    limits=PRICES_LIMITS,
    writes=True,
)

PRICES_DATASET = Dataset(
    name="prices",
    source="GET /api/v2/list/goods/filter",
    key=(KeyField("nm_id", "nmID"),),
    kind="snapshot",
)


async def upload_prices(client: WbClient, items: Sequence[Row]) -> int:
    """Upload prices/discounts (``nmID``, ``price``, ``discount``; up to 1000); the task id."""
    ep = PRICES_UPLOAD_TASK
    reply = await client.call(ep, json={"data": list(items)})
    data = reply.data.get("data") if isinstance(reply.data, dict) else None
    if not isinstance(data, dict) or not isinstance(data.get("id"), int):
        raise bad_reply(reply, ep, "upload reply has no task id")
    task_id: int = data["id"]
    return task_id


class PricingCursor(CursorShape):
    """Whether the uploads are done, and the goods list's next offset."""

    uploaded: Flag = optional()
    offset: Count = optional()


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
        intent = await ledger.begin_price_upload(inp.cabinet_id, {"data": items})
        task_id = await upload_prices(inp.client, items)
        await ledger.finish_price_upload(intent, task_id)
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
    async for listed in goods(inp.client, offset=int(cursor.get("offset", 0))):
        yield SyncPage("prices", listed.rows, {"uploaded": True, "offset": listed.cursor})


SYNC = Sync(
    name="pricing-bulk",
    calls=(PRICES_UPLOAD_TASK, PRICES_GOODS_LIST),
    long=False,
    interval_s=15 * 60,
    stores=(PRICES_DATASET,),
    pages=pages,
    cursor=PricingCursor,
)
