"""The WB methods more than one caller shares, declared with their typed calls.

The advert list (the ads sync and the autobidder), the content cards list (the catalog and
digitization syncs), and the goods price list and acceptance coefficients (their syncs and the
API's WB routes). A method one sync alone calls is declared in that sync's module.

Pagers are async iterators of ``Page``: the rows of one reply and the cursor that resumes right
after them, so a caller can store rows and cursor page by page and pick up after a deferral.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from wbsync.values.scope import Limit
from wbsync.wb.client import WbClient
from wbsync.wb.endpoints import Endpoint, TypeLimits
from wbsync.wb.paging import Page, Row, batches, offset_pages, rows_at
from wbsync.wb.sections import CONTENT, PRICES, PRICES_LIMITS, PROMOTION, TARIFFS
from wbsync.wb.tokens import Category

__all__ = [
    "CONTENT_CARDS_LIST",
    "PRICES_GOODS_LIST",
    "PROMOTION_ADVERTS",
    "TARIFFS_ACCEPTANCE_COEFFICIENTS",
    "Page",
    "acceptance_coefficients",
    "adverts",
    "cards",
    "goods",
]

PROMOTION_ADVERTS = Endpoint(
    name="promotion.adverts",
    section=PROMOTION,
    method="GET",
    path="/api/advert/v2/adverts",
    group="promotion.adverts",
    category=Category.PROMOTION,
    limits=TypeLimits.same(Limit(1.0, 5, 5), base=Limit(3600.0, 1, 1)),
)
# WB publishes one table without token types: it applies to every token type.
CONTENT_CARDS_LIST = Endpoint(
    name="content.cards_list",
    section=CONTENT,
    method="POST",
    path="/content/v2/get/cards/list",
    group="content.cards_list",
    category=Category.CONTENT,
    limits=TypeLimits.same(Limit(60.0, 100, 5), base=Limit(60.0, 100, 5)),
)
PRICES_GOODS_LIST = Endpoint(
    name="prices.goods_list",
    section=PRICES,
    method="GET",
    path="/api/v2/list/goods/filter",
    group="prices",
    category=Category.PRICES,
    limits=PRICES_LIMITS,
)
# WB: acceptance coefficients answer a token of any category.
TARIFFS_ACCEPTANCE_COEFFICIENTS = Endpoint(
    name="tariffs.acceptance_coefficients",
    section=TARIFFS,
    method="GET",
    path="/api/tariffs/v1/acceptance/coefficients",
    group="tariffs.acceptance_coefficients",
    category=None,
    limits=TypeLimits.same(Limit(60.0, 6, 6), base=Limit(3600.0, 1, 1)),
)


async def adverts(
    client: WbClient,
    *,
    ids: Sequence[int] = (),
    statuses: Sequence[int] = (),
    payment_type: str | None = None,
) -> list[Row]:
    """Campaigns (one call; ``ids`` in batches of 50)."""
    ep = PROMOTION_ADVERTS
    params: dict[str, Any] = {}
    if statuses:
        params["statuses"] = ",".join(map(str, statuses))
    if payment_type:
        params["payment_type"] = payment_type
    if not ids:
        return rows_at(await client.call(ep, params=params or None), ep, "adverts")
    out: list[Row] = []
    for batch in batches(list(ids), 50):
        reply = await client.call(ep, params=params | {"ids": ",".join(map(str, batch))})
        out += rows_at(reply, ep, "adverts")
    return out


async def cards(
    client: WbClient, *, limit: int = 100, cursor: Row | None = None
) -> AsyncIterator[Page]:
    """Content cards, ascending; the cursor is ``{"updatedAt", "nmID"}`` of the last card."""
    ep = CONTENT_CARDS_LIST
    position = dict(cursor or {})
    while True:
        body = {
            "settings": {
                "sort": {"ascending": True},
                "filter": {"withPhoto": -1},
                "cursor": {"limit": limit, **position},
            }
        }
        reply = await client.call(ep, json=body)
        rows = rows_at(reply, ep, "cards")
        got = reply.data.get("cursor") or {}
        if rows:
            position = {"updatedAt": got.get("updatedAt"), "nmID": got.get("nmID")}
            yield Page(rows, dict(position))
        if int(got.get("total", len(rows))) < limit:
            return


def goods(client: WbClient, *, limit: int = 1000, offset: int = 0) -> AsyncIterator[Page]:
    """Goods with prices, limit + offset until an empty list; the cursor is the next offset."""
    ep = PRICES_GOODS_LIST

    async def fetch(limit: int, offset: int) -> list[Row]:
        reply = await client.call(ep, params={"limit": limit, "offset": offset})
        return rows_at(reply, ep, "data", "listGoods")

    return offset_pages(fetch, limit=limit, offset=offset, stop_short=False)


async def acceptance_coefficients(
    client: WbClient, *, warehouse_ids: Sequence[int] = ()
) -> list[Row]:
    """Acceptance coefficients (``coefficient`` -1 closed, 0 free, >0 paid)."""
    ep = TARIFFS_ACCEPTANCE_COEFFICIENTS
    params = {"warehouseIDs": ",".join(map(str, warehouse_ids))} if warehouse_ids else None
    return rows_at(await client.call(ep, params=params), ep)
