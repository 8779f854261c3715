"""rnp-ads-sync: the advert list, then full stats of the campaigns WB keeps statistics for.

WB serves full stats for campaigns in statuses 7, 9 and 11 only, 50 ids and 31 days a request,
and refuses a request none of whose ids has statistics in the window (``fullstats``
reads that refusal as no rows). So the run asks only for those campaigns, each over the part of
the stats window within its life as the list gives it (from its start to its deletion; a
campaign never started has none), campaigns sharing a window asked together.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from datetime import date, datetime, timedelta
from typing import Annotated, Any

from pydantic import AfterValidator

from wbsync.store.datasets import Dataset, KeyField
from wbsync.syncs.base import Count, Cursor, CursorShape, Sync, SyncInput, SyncPage, Text, optional
from wbsync.system import clock
from wbsync.values.scope import Limit
from wbsync.wb.client import WbClient
from wbsync.wb.endpoints import Endpoint, NoData, TypeLimits
from wbsync.wb.methods import PROMOTION_ADVERTS, adverts
from wbsync.wb.paging import Page, Row, batch_pages, rows_at
from wbsync.wb.sections import PROMOTION
from wbsync.wb.tokens import Category

#: fullstats' answer when none of the ids has statistics in the window (a paused or finished
#: campaign's, for example): 400 ``{"error": "there are no companies with correct intervals"}``.
FULLSTATS_NO_COMPANIES = NoData(400, "there are no companies with correct intervals")

PROMOTION_FULLSTATS = Endpoint(
    name="promotion.fullstats",
    section=PROMOTION,
    method="GET",
    path="/adv/v3/fullstats",
    group="promotion.fullstats",
    category=Category.PROMOTION,
    limits=TypeLimits.same(Limit(60.0, 3, 1), base=Limit(3600.0, 1, 1)),
    no_data=(FULLSTATS_NO_COMPANIES,),
)

# The advert list is read whole on every run: a campaign WB no longer lists was deleted.
ADVERTS = Dataset(
    name="adverts",
    source="GET /api/advert/v2/adverts",
    key=(KeyField("advert_id", "id"),),
    kind="snapshot",
)
ADVERT_STATS = Dataset(
    name="advert_stats",
    source="GET /adv/v3/fullstats (one row per campaign per day)",
    key=(KeyField("advert_id", "advertId"), KeyField("date", "date", "date")),
    retention_days=400,
)


def advert_stats_rows(item: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Split one ``/adv/v3/fullstats`` campaign item into stored rows, one per day.

    Each row is a ``days[]`` element as WB sent it plus the campaign's ``advertId``; the
    campaign-level totals cover the requested interval, not a day, so they are not stored.
    """
    days: Sequence[Mapping[str, Any]] = item.get("days") or ()
    return [{**day, "advertId": item["advertId"]} for day in days]


#: The campaign statuses WB documents full stats for: 7 finished, 9 active, 11 paused.
FULLSTATS_STATUSES = frozenset({7, 9, 11})


def fullstats(
    client: WbClient, *, ids: Sequence[int], begin: date, end: date
) -> AsyncIterator[Page]:
    """Full stats of ``ids`` (campaigns in ``FULLSTATS_STATUSES``) over [begin, end] (WB's days,
    at most 31), in batches of 50; the cursor is how many ids are done. A batch none of whose
    ids has statistics in the window is an empty page (``FULLSTATS_NO_COMPANIES``)."""
    ep = PROMOTION_FULLSTATS

    async def fetch(batch: Sequence[int]) -> list[Row]:
        params = {
            "ids": ",".join(map(str, batch)),
            "beginDate": begin.isoformat(),
            "endDate": end.isoformat(),
        }
        return rows_at(await client.call(ep, params=params), ep)

    return batch_pages(list(ids), 50, fetch)


Window = tuple[date, date]


def _iso_day(text: str) -> str:
    date.fromisoformat(text)  # ValueError: "Invalid isoformat string" names the value
    return text


#: A day at WB, as an ISO date.
Day = Annotated[Text, AfterValidator(_iso_day)]


class StatsRun(CursorShape):
    """The next ``count`` campaigns of the cursor's ids are asked for over [begin, end]."""

    begin: Day
    end: Day
    count: Count


class AdsCursor(CursorShape):
    """The campaigns to ask stats for, in order, over which windows, and how many are done.

    Without ``runs`` (a cursor written before windows were kept) every id is asked for over
    the run's whole stats window.
    """

    ids: list[Count]
    done: Count
    runs: list[StatsRun] = optional()


def _wb_day(stamp: Any) -> date | None:
    """The day at WB (Moscow) of a campaign timestamp; None when it cannot be read."""
    try:
        moment = datetime.fromisoformat(str(stamp))
    except ValueError:
        return None
    return moment.astimezone(clock.WB_ZONE).date() if moment.tzinfo else moment.date()


def campaign_window(campaign: Mapping[str, Any], window: Window) -> Window | None:
    """The part of ``window`` within the campaign's life; None when WB has no statistics of it
    there (a status WB serves none for, never started, or not alive in the window)."""
    if campaign.get("status") not in FULLSTATS_STATUSES:
        return None
    stamps = campaign.get("timestamps") or {}
    if stamps.get("started") is None:
        return None  # WB's list says null until the campaign is first launched
    begin, end = window
    started, deleted = _wb_day(stamps["started"]), _wb_day(stamps.get("deleted"))
    first = max(begin, started) if started else begin
    last = min(end, deleted) if deleted else end
    return (first, last) if first <= last else None


def plan(campaigns: list[dict[str, Any]], window: Window) -> Cursor:
    """The cursor of a run's stats: campaigns with statistics, grouped by their windows."""
    asks = sorted(
        (found, c["id"]) for c in campaigns if (found := campaign_window(c, window)) is not None
    )
    runs: list[dict[str, Any]] = []
    for (begin, end), _ in asks:
        if runs and runs[-1]["begin"] == begin.isoformat() and runs[-1]["end"] == end.isoformat():
            runs[-1]["count"] += 1
        else:
            runs.append({"begin": begin.isoformat(), "end": end.isoformat(), "count": 1})
    return {"ids": [advert_id for _, advert_id in asks], "done": 0, "runs": runs}


def _runs(cursor: Cursor, window: Window) -> Iterator[tuple[int, list[int], Window]]:
    """(index of the first id, ids, window) of each run of the cursor."""
    ids, start = list(cursor["ids"]), 0
    runs = cursor.get("runs")
    if runs is None:
        runs = [{"begin": window[0].isoformat(), "end": window[1].isoformat(), "count": len(ids)}]
    for run in runs:
        asked = (date.fromisoformat(run["begin"]), date.fromisoformat(run["end"]))
        yield start, ids[start : start + run["count"]], asked
        start += run["count"]


async def pages(inp: SyncInput) -> AsyncIterator[SyncPage]:
    """Campaigns (one page), then each batch's daily stats within the stats window."""
    window = (inp.today - timedelta(days=inp.options.stats_days - 1), inp.today)
    cursor = inp.cursor or {}
    if "ids" not in cursor:
        campaigns = await adverts(inp.client)
        cursor = plan(campaigns, window)
        yield SyncPage("adverts", campaigns, cursor)
    for start, ids, (begin, end) in _runs(cursor, window):
        skip = max(0, int(cursor["done"]) - start)
        if skip >= len(ids):
            continue
        async for page in fullstats(inp.client, ids=ids[skip:], begin=begin, end=end):
            rows = [row for item in page.rows for row in advert_stats_rows(item)]
            cursor = {**cursor, "done": start + skip + int(page.cursor)}
            yield SyncPage("advert_stats", rows, cursor)


SYNC = Sync(
    name="rnp-ads-sync",
    calls=(PROMOTION_ADVERTS, PROMOTION_FULLSTATS),
    long=True,
    interval_s=3600,
    stores=(ADVERTS, ADVERT_STATS),
    pages=pages,
    cursor=AdsCursor,
)
