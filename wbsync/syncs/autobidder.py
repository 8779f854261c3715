"""autobidder-sync: read the search-cluster bids of the active campaigns WB lets us bid on,
apply the bid rule, write the changes back through the bids method, and record what was sent.

WB's set-bids takes only campaigns with a custom bid (``bid_type`` manual) paid per mille
(``payment_type`` cpm); a campaign's ``nm_settings`` may be null.

Bids are written with WB's v1 method (``POST /api/advert/v1/normquery/bids``, bids in kopecks)
when the token's type may call it (Personal and Service), else with v0 (``POST
/adv/v0/normquery/bids``); see ``_Writer`` for when a run moves from v1 to v0. v1's reply says
per bid whether WB set it; v0 answers an empty 200 for a call it applied whole. When WB refuses
a call whole (a 4xx: a campaign changed between reading and writing), each bid is sent alone, so
one refused item does not sink the rest. Each bid tried is counted by outcome
(``wbsync_bid_writes_total``), a refusal is logged with WB's reason, and the bid row's
``last_write_error`` holds WB's words for a refused bid, NULL for one WB set.

Changes are applied in the order of their (campaign, item, search cluster) key, and the cursor
keeps the key of the last one applied. A resumed run recomputes the changes from the stored
bids (which already hold what the first batches set) and applies only those past that key, so
no bid is skipped and none is moved twice.

WB's bids methods (read, v0 and v1 writes) are declared with their calls in ``syncs/bids.py``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

from wbsync.errors import WbAuthError, WbMethodDisabledError, WbPermissionError, WbRequestError
from wbsync.observability.metrics import BID_WRITES, REFUSED_ITEMS
from wbsync.store.datasets import Dataset, KeyField, KeyValue
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
from wbsync.syncs.bids import (
    NOT_IN_REPLY,
    PROMOTION_GET_BIDS,
    PROMOTION_SET_BIDS,
    PROMOTION_SET_BIDS_V1,
    BidKey,
    get_bids,
    set_bids,
    set_bids_v1,
)
from wbsync.wb.methods import PROMOTION_ADVERTS, adverts

ACTIVE = 9
_BATCH = 100  # WB takes at most 100 bids a call

log = logging.getLogger(__name__)

# Every bid of every active campaign's items, each run: a paused campaign's bids are gone.
# last_write_error: WB's words when it refused the autobidder's last write of the bid (NULL
# when that write went through, or none was sent).
BIDS = Dataset(
    name="bids",
    source="POST /adv/v0/normquery/get-bids",
    key=(
        KeyField("advert_id", "advert_id"),
        KeyField("nm_id", "nm_id"),
        KeyField("norm_query", "norm_query", "str"),
    ),
    kind="snapshot",
    columns=("last_write_error",),
)


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


#: v1 answers that say the token may not use it (or WB switched it off): the run goes on with v0.
_V1_REFUSALS = (WbAuthError, WbPermissionError, WbMethodDisabledError)

#: The longest note of WB's words kept on a bid row (``last_write_error``).
WRITE_ERROR_MAX_CHARS = 1000

Outcomes = dict[BidKey, str | None]
"""Each bid tried: None when WB set it, else WB's words."""


class _Writer:
    """Writes one run's bids: with v1 while the token may use it, else with v0.

    v1 is chosen by token type (WB's key icon: Personal and Service). A 401, 403 or 404 from v1
    (WB refuses the token for it after all, or switched it off) moves the rest of the run to v0,
    which gets the same bids; the next run tries v1 again. If v0 refuses too, its error is the
    run's, as before v1 existed.
    """

    def __init__(self, inp: SyncInput) -> None:
        self._inp = inp
        self.v1 = PROMOTION_SET_BIDS_V1.allows(inp.client.token.type)

    @property
    def method(self) -> str:
        """The WB method bids are written with now."""
        return (PROMOTION_SET_BIDS_V1 if self.v1 else PROMOTION_SET_BIDS).name

    async def send(self, batch: list[dict[str, Any]]) -> Outcomes:
        """Write ``batch``; each bid's outcome."""
        if self.v1:
            try:
                return await _each_alone_if_refused(self._inp, batch, _v1_call)
            except _V1_REFUSALS as exc:
                log.warning(
                    "cabinet %s: WB refused the v1 bids method (%s); writing with v0 for the "
                    "rest of this run",
                    self._inp.client.cabinet,
                    exc,
                )
                self.v1 = False
        return await _each_alone_if_refused(self._inp, batch, _v0_call)


Call = Callable[[SyncInput, list[dict[str, Any]]], Awaitable[Outcomes]]


async def _v1_call(inp: SyncInput, batch: list[dict[str, Any]]) -> Outcomes:
    body = [
        {
            "advertId": c["advert_id"],
            "nmId": c["nm_id"],
            "normQuery": c["norm_query"],
            "bidMinorUnits": c["bid_kopecks"],
        }
        for c in batch
    ]
    return await set_bids_v1(inp.client, body)


async def _v0_call(inp: SyncInput, batch: list[dict[str, Any]]) -> Outcomes:
    """v0 answers an empty 200 for the whole call: every bid set, or a 4xx for all."""
    body = [{k: c[k] for k in ("advert_id", "nm_id", "norm_query", "bid")} for c in batch]
    await set_bids(inp.client, body)
    return dict.fromkeys((_key(c) for c in batch), None)


async def _each_alone_if_refused(
    inp: SyncInput, batch: list[dict[str, Any]], call: Call
) -> Outcomes:
    """``call`` for the batch; when WB refuses it whole (a 4xx: a campaign changed between
    reading and writing), each bid alone, so one refused item does not sink the rest."""
    if len(batch) > 1:
        try:
            return await call(inp, batch)
        except WbMethodDisabledError:
            raise  # about the method, not an item
        except WbRequestError:
            pass
    out: Outcomes = {}
    for change in batch:
        try:
            out.update(await call(inp, [change]))
        except WbMethodDisabledError:
            raise
        except WbRequestError as exc:
            # WB's words without the request id: the bid's note changes only when they do.
            out[_key(change)] = exc.words or exc.message
    return out


def write_error_note(reason: str) -> str:
    """WB's words as a bid row's ``last_write_error``: control characters (a NUL PostgreSQL
    cannot store) made spaces, at most ``WRITE_ERROR_MAX_CHARS``."""
    clean = "".join(ch if ch.isprintable() else " " for ch in reason).strip()
    return clean[:WRITE_ERROR_MAX_CHARS]


def _count(inp: SyncInput, method: str, tried: list[dict[str, Any]], said: Outcomes) -> None:
    """The metrics and a log line per refused bid."""
    refused = [c for c in tried if said[_key(c)] is not None]
    BID_WRITES.labels("ok").inc(len(tried) - len(refused))
    BID_WRITES.labels("refused").inc(len(refused))
    for c in refused:
        REFUSED_ITEMS.labels(method).inc()
        log.warning(
            "cabinet %s: WB refused the bid %s for campaign %s item %s (%r): %s",
            inp.client.cabinet,
            c["bid"],
            c["advert_id"],
            c["nm_id"],
            c["norm_query"],
            said[_key(c)],
        )


def _key(row: Mapping[str, Any]) -> BidKey:
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
    writer = _Writer(inp)
    for start in range(0, len(changes), _BATCH):
        tried = changes[start : start + _BATCH]
        said = await writer.send(tried)
        said = {key: said.get(key, NOT_IN_REPLY) for key in map(_key, tried)}
        _count(inp, writer.method, tried, said)
        applied = await _record(inp, tried, said)
        stored = [{k: v for k, v in c.items() if k != "old_bid"} for c in applied]
        # Past the last bid tried, accepted or refused: a refused one is not sent again.
        yield SyncPage("bids", stored, {**cursor, "applied_through": list(_key(tried[-1]))})


async def _record(
    inp: SyncInput, tried: list[dict[str, Any]], said: Outcomes
) -> list[dict[str, Any]]:
    """The bids WB set into ``sent_bids``, every bid's note onto its row; the bids WB set."""
    applied = [c for c in tried if said[_key(c)] is None]
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
            for c in applied
        ]
    )
    notes: dict[tuple[KeyValue, ...], str | None] = {
        key: None if why is None else write_error_note(why) for key, why in said.items()
    }
    await inp.store.set_column("bids", inp.cabinet_id, "last_write_error", notes)
    return applied


async def pages(inp: SyncInput) -> AsyncIterator[SyncPage]:
    """Bids of every (campaign, item) of active campaigns WB takes bids for, then the rule's
    changes."""
    cursor = inp.cursor or {}
    if "pairs" not in cursor:
        campaigns = await adverts(inp.client, statuses=(ACTIVE,))
        pairs = [[c["id"], nm] for c in campaigns if biddable(c) for nm in campaign_items(c)]
        cursor = {"pairs": pairs, "done": 0, "applying": False, "applied_through": None}
        yield SyncPage.checkpoint(cursor)
    if not cursor["applying"]:
        done = int(cursor["done"])
        wanted = [(a, n) for a, n in cursor["pairs"][done:]]
        async for page in get_bids(inp.client, wanted):
            cursor = {**cursor, "done": done + int(page.cursor)}
            yield SyncPage("bids", page.rows, cursor)
        cursor = {**cursor, "applying": True}
        yield SyncPage.checkpoint(cursor)
    async for change in _apply(inp, cursor):
        yield change


SYNC = Sync(
    name="autobidder-sync",
    calls=(PROMOTION_ADVERTS, PROMOTION_GET_BIDS, PROMOTION_SET_BIDS),
    # Not required: v0 takes every token type, v1 is used instead where the type allows it.
    also_calls=(PROMOTION_SET_BIDS_V1,),
    long=True,
    interval_s=10 * 60,
    stores=(BIDS,),
    pages=pages,
    cursor=AutobidderCursor,
)
