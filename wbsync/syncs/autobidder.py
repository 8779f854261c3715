"""autobidder-sync: read the search-cluster bids of the active campaigns WB lets us bid on,
apply the bid rule, write the changes back through the bids method, and record what was sent.

WB's set-bids takes only campaigns with a custom bid (``bid_type`` manual) paid per mille
(``payment_type`` cpm); a campaign's ``nm_settings`` may be null. When WB refuses a batch
anyway (a campaign changed between reading and writing), each bid is sent alone, so one refused
item does not sink the rest; every refusal is logged with WB's reason and counted.

Changes are applied in the order of their (campaign, item, search cluster) key, and the cursor
keeps the key of the last one applied. A resumed run recomputes the changes from the stored
bids (which already hold what the first batches set) and applies only those past that key, so
no bid is skipped and none is moved twice.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from wbsync.errors import WbMethodDisabledError, WbRequestError
from wbsync.metrics import REFUSED_ITEMS
from wbsync.store.datasets import dataset
from wbsync.store.ledger import SentBid
from wbsync.syncs.base import (
    BidRule,
    Count,
    Cursor,
    CursorShape,
    Flag,
    Sync,
    SyncInput,
    SyncPage,
    Text,
)
from wbsync.wb import endpoints as eps
from wbsync.wb import methods

ACTIVE = 9
_BATCH = 100  # WB takes at most 100 bids a call

log = logging.getLogger(__name__)


class AutobidderCursor(CursorShape):
    """The (campaign, item) pairs, how many have their bids read, whether the changes are being
    applied, and the (campaign, item, search cluster) key of the last one applied."""

    pairs: list[tuple[Count, Count]]
    done: Count
    applying: Flag
    applied_through: tuple[Count, Count, Text] | None


def biddable(campaign: Mapping[str, Any]) -> bool:
    """True when WB's set-bids accepts the campaign: custom bid, paid per mille."""
    settings = campaign.get("settings") or {}
    return campaign.get("bid_type") == "manual" and settings.get("payment_type") == "cpm"


def campaign_items(campaign: Mapping[str, Any]) -> list[int]:
    """The item ids of a campaign (``nm_settings`` may be null or hold odd entries)."""
    return [
        int(nm["nm_id"])
        for nm in campaign.get("nm_settings") or []
        if isinstance(nm, Mapping) and nm.get("nm_id") is not None
    ]


async def _send(inp: SyncInput, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Send ``batch``; the bids WB accepted (all, or those it took one by one)."""
    body = [{k: c[k] for k in ("advert_id", "nm_id", "norm_query", "bid")} for c in batch]
    if len(batch) > 1:
        try:
            await methods.set_bids(inp.client, body)
            return batch
        except WbMethodDisabledError:
            raise
        except WbRequestError:
            pass  # one refused item refuses the whole call: send each alone
    accepted = []
    for change, item in zip(batch, body, strict=True):
        try:
            await methods.set_bids(inp.client, [item])
        except WbMethodDisabledError:
            raise
        except WbRequestError as exc:
            REFUSED_ITEMS.labels("promotion.set_bids").inc()
            log.warning(
                "cabinet %s: WB refused the bid %s for campaign %s item %s (%r): %s",
                inp.client.cabinet,
                item["bid"],
                item["advert_id"],
                item["nm_id"],
                item["norm_query"],
                exc,
            )
            continue
        accepted.append(change)
    return accepted


def _key(row: Mapping[str, Any]) -> tuple[int, int, str]:
    return (int(row["advert_id"]), int(row["nm_id"]), str(row.get("norm_query") or ""))


def _changes(rows: Sequence[Mapping[str, Any]], rule: BidRule) -> list[dict[str, Any]]:
    changed = []
    for row in rows:
        new = rule.next_bid(int(row["bid"]))
        if new != int(row["bid"]):
            changed.append({**row, "bid": new, "bid_kopecks": new * 100, "old_bid": row["bid"]})
    return changed


async def _apply(inp: SyncInput, cursor: Cursor) -> AsyncIterator[SyncPage]:
    pairs = {(a, n) for a, n in cursor["pairs"]}
    through = cursor.get("applied_through")
    after = (int(through[0]), int(through[1]), str(through[2])) if through else None
    pending = sorted(
        (
            r
            for r in await inp.store.fetch("bids", inp.cabinet_id)
            if (r["advert_id"], r["nm_id"]) in pairs and (after is None or _key(r) > after)
        ),
        key=_key,
    )
    changes = _changes(pending, inp.options.bid_rule)
    for start in range(0, len(changes), _BATCH):
        tried = changes[start : start + _BATCH]
        batch = await _send(inp, tried)
        await inp.store.ledger.record_bids(
            [
                SentBid(
                    cabinet_id=inp.cabinet_id,
                    advert_id=c["advert_id"],
                    nm_id=c["nm_id"],
                    norm_query=c["norm_query"],
                    old_bid=c["old_bid"],
                    new_bid=c["bid"],
                )
                for c in batch
            ]
        )
        stored = [{k: v for k, v in c.items() if k != "old_bid"} for c in batch]
        # Past the last bid tried, accepted or refused: a refused one is not sent again.
        yield SyncPage("bids", stored, {**cursor, "applied_through": list(_key(tried[-1]))})


async def pages(inp: SyncInput) -> AsyncIterator[SyncPage]:
    """Bids of every (campaign, item) of active campaigns WB takes bids for, then the rule's
    changes."""
    cursor = inp.cursor or {}
    if "pairs" not in cursor:
        campaigns = await methods.adverts(inp.client, statuses=(ACTIVE,))
        pairs = [[c["id"], nm] for c in campaigns if biddable(c) for nm in campaign_items(c)]
        cursor = {"pairs": pairs, "done": 0, "applying": False, "applied_through": None}
        yield SyncPage.checkpoint(cursor)
    if not cursor["applying"]:
        done = int(cursor["done"])
        wanted = [(a, n) for a, n in cursor["pairs"][done:]]
        async for page in methods.get_bids(inp.client, wanted):
            cursor = {**cursor, "done": done + int(page.cursor)}
            yield SyncPage("bids", page.rows, cursor)
        cursor = {**cursor, "applying": True}
        yield SyncPage.checkpoint(cursor)
    async for change in _apply(inp, cursor):
        yield change


SYNC = Sync(
    name="autobidder-sync",
    calls=(eps.PROMOTION_ADVERTS, eps.PROMOTION_GET_BIDS, eps.PROMOTION_SET_BIDS),
    long=True,
    interval_s=10 * 60,
    stores=(dataset("bids"),),
    pages=pages,
    cursor=AutobidderCursor,
)
