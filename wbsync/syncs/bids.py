"""WB's search-cluster bids methods, which the autobidder calls: read (``get_bids``), and write
through v0 (``set_bids``) or v1 (``set_bids_v1``), with their limits.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from wbsync.values.scope import Limit
from wbsync.wb.client import WbClient
from wbsync.wb.endpoints import Endpoint, TypeLimits
from wbsync.wb.paging import Page, Row, bad_reply, batch_pages, batches, rows_at
from wbsync.wb.sections import PROMOTION
from wbsync.wb.tokens import Category

__all__ = [
    "NOT_IN_REPLY",
    "PROMOTION_GET_BIDS",
    "PROMOTION_SET_BIDS",
    "PROMOTION_SET_BIDS_V1",
    "BidKey",
    "get_bids",
    "set_bids",
    "set_bids_v1",
]

PROMOTION_GET_BIDS = Endpoint(
    name="promotion.get_bids",
    section=PROMOTION,
    method="POST",
    path="/adv/v0/normquery/get-bids",
    group="promotion.get_bids",
    category=Category.PROMOTION,
    limits=TypeLimits.same(Limit(1.0, 5, 10), base=Limit(3600.0, 5, 1)),
)
PROMOTION_SET_BIDS = Endpoint(
    name="promotion.set_bids",
    section=PROMOTION,
    method="POST",
    path="/adv/v0/normquery/bids",
    group="promotion.set_bids",
    category=Category.PROMOTION,
    limits=TypeLimits.same(Limit(1.0, 2, 4), base=Limit(3600.0, 5, 1)),
    writes=True,
)
# Key icon: Personal and Service tokens only (no Base, no Base with secret; no Test row).
_SET_BIDS_V1 = Limit(period_s=1.0, limit=2, burst=4)
PROMOTION_SET_BIDS_V1 = Endpoint(
    name="promotion.set_bids_v1",
    section=PROMOTION,
    method="POST",
    path="/api/advert/v1/normquery/bids",
    group="promotion.set_bids_v1",
    category=Category.PROMOTION,
    limits=TypeLimits(personal=_SET_BIDS_V1, service=_SET_BIDS_V1, test=None, base=None),
    writes=True,
)


def get_bids(client: WbClient, items: Sequence[tuple[int, int]]) -> AsyncIterator[Page]:
    """Search-cluster bids of (advert_id, nm_id) pairs, 100 per call; cursor = pairs done."""
    ep = PROMOTION_GET_BIDS

    async def fetch(batch: Sequence[tuple[int, int]]) -> list[Row]:
        body = {"items": [{"advert_id": a, "nm_id": n} for a, n in batch]}
        return rows_at(await client.call(ep, json=body), ep, "bids")

    return batch_pages(list(items), 100, fetch)


async def set_bids(client: WbClient, bids: Sequence[Row]) -> None:
    """Set search-cluster bids (``advert_id``, ``nm_id``, ``norm_query``, ``bid``), 100 a call.

    Returns only when WB applied every batch: its documented answer is a 2xx with no body; a
    body that is an error object (or anything else) is an unusable reply, never a success.
    """
    ep = PROMOTION_SET_BIDS
    for batch in batches(list(bids), 100):
        reply = await client.call(ep, json={"bids": list(batch)})
        if reply.data is not None and reply.data != {}:
            raise bad_reply(reply, ep, "expected no body from a bid update")


BidKey = tuple[int, int, str]
"""A bid's (campaign, item, search cluster)."""

#: What an item of a v1 bids call WB's reply names neither applied nor refused is noted with.
NOT_IN_REPLY = "WB's reply listed this bid neither as set nor as failed"


async def set_bids_v1(client: WbClient, bids: Sequence[Row]) -> dict[BidKey, str | None]:
    """Set search-cluster bids through WB's v1 method (``advertId``, ``nmId``, ``normQuery``,
    ``bidMinorUnits``: kopecks), 100 a call; each bid's outcome: None when WB set it, else
    WB's reason (``NOT_IN_REPLY`` for a bid its reply does not mention).

    WB answers each item in ``success`` or ``failed``: a call WB answers 200 may have set some
    bids and refused others. A reply without both lists is unusable.
    """
    ep = PROMOTION_SET_BIDS_V1
    out: dict[BidKey, str | None] = {}
    for batch in batches(list(bids), 100):
        reply = await client.call(ep, json={"bids": list(batch)})
        data = reply.data
        if not isinstance(data, dict) or not all(
            isinstance(data.get(k), list) for k in ("success", "failed")
        ):
            raise bad_reply(reply, ep, "expected the lists success and failed")
        said = _bid_outcomes(data["success"], data["failed"])
        for bid in batch:
            key = (int(bid["advertId"]), int(bid["nmId"]), str(bid["normQuery"]))
            out[key] = said.get(key, NOT_IN_REPLY)
    return out


def _bid_outcomes(success: list[Any], failed: list[Any]) -> dict[BidKey, str | None]:
    """The items of a v1 reply by key; a failure wins over a success of the same key."""
    out: dict[BidKey, str | None] = {}
    for item, reason in [(i, None) for i in success] + [(i, _reason(i)) for i in failed]:
        key = _bid_key(item)
        if key is not None:
            out[key] = reason
    return out


def _bid_key(item: Any) -> BidKey | None:
    if not isinstance(item, Mapping):
        return None
    try:
        return (int(item["advertId"]), int(item["nmId"]), str(item["normQuery"]))
    except (KeyError, TypeError, ValueError):
        return None  # an item we cannot place: its bid stays NOT_IN_REPLY


def _reason(item: Any) -> str:
    reason = item.get("reason") if isinstance(item, Mapping) else None
    return str(reason) if reason else "WB gave no reason"
