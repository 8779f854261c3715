"""autobidder-sync: read the search-cluster bids of active manual campaigns, apply the bid rule,
write the changes back through the bids method, and record what was sent.

Changes are applied in the order of their (campaign, item, search cluster) key, and the cursor
keeps the key of the last one applied. A resumed run recomputes the changes from the stored
bids (which already hold what the first batches set) and applies only those past that key, so
no bid is skipped and none is moved twice.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from wbsync.store.ledger import SentBid
from wbsync.syncs.base import BidRule, Cursor, Sync, SyncInput, SyncPage
from wbsync.wb import methods

ACTIVE = 9
_BATCH = 100  # WB takes at most 100 bids a call


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
        batch = changes[start : start + _BATCH]
        await methods.set_bids(
            inp.client,
            [{k: c[k] for k in ("advert_id", "nm_id", "norm_query", "bid")} for c in batch],
        )
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
        yield SyncPage("bids", stored, {**cursor, "applied_through": list(_key(batch[-1]))})


async def pages(inp: SyncInput) -> AsyncIterator[SyncPage]:
    """Bids of every (campaign, item) of active manual campaigns, then the rule's changes."""
    cursor = inp.cursor or {}
    if "pairs" not in cursor:
        campaigns = await methods.adverts(inp.client, statuses=(ACTIVE,))
        pairs = [
            [c["id"], nm["nm_id"]]
            for c in campaigns
            if c.get("bid_type") == "manual"
            for nm in c.get("nm_settings", [])
        ]
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
    long=True,
    interval_s=10 * 60,
    datasets=("bids",),
    pages=pages,
)
