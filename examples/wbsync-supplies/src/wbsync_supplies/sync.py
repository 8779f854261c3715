"""The supplies sync: WB's list of the seller's FBW supplies, every run the whole list.

From WB's document of the method (orders-fbw, "Supplies List", ``POST /api/v1/supplies``):
``limit`` (at most 1000) and ``offset`` in the query, filters in the JSON body (none here: the
sync wants every supply), a bare JSON array in reply. A supply's row changes as it moves
through its statuses, and WB gives no feed of changes, so the dataset is a snapshot: a run
that reached the end tombstones the supplies WB no longer lists. WB lists the newest first, so
a supply created during a run pushes the rest one place down (a row comes twice: harmless);
one that leaves the list during a run pulls them up, and the row that crosses the page
boundary is missed and tombstoned until the next run brings it back.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from wbsync.extend import (
    Category,
    Count,
    CursorShape,
    Dataset,
    Endpoint,
    KeyField,
    Limit,
    Page,
    Row,
    Section,
    Sync,
    SyncInput,
    SyncPage,
    TypeLimits,
    WbClient,
    offset_pages,
    rows_at,
)

# WB's supplies host; WB runs no -sandbox twin of it (its /ping table), so Test tokens are
# refused by the client before sending.
SUPPLIES = Section("supplies", "supplies-api", category=Category.SUPPLIES)

LIST = Endpoint(
    name="supplies.list",
    section=SUPPLIES,
    method="POST",
    path="/api/v1/supplies",
    group="supplies.list",
    category=Category.SUPPLIES,
    limits=TypeLimits.same(
        Limit(period_s=60.0, limit=30, burst=10), base=Limit(period_s=3600.0, limit=2, burst=1)
    ),
)

# WB's connection check of the host: ``wbsync cabinets check`` asks it for the section (without
# it the section is reported "unchecked"). 3 every 30 s per host, every token type (WB's /ping).
PING = Endpoint(
    name="supplies.ping",
    section=SUPPLIES,
    method="GET",
    path="/ping",
    group="supplies.ping",
    category=Category.SUPPLIES,
    limits=TypeLimits.same(
        Limit(period_s=30.0, limit=3, burst=3), base=Limit(period_s=30.0, limit=3, burst=3)
    ),
    probe=True,
)

# WB's maximum ``limit``.
PAGE_LIMIT = 1000

ROWS = Dataset(
    name="supplies",
    source="POST /api/v1/supplies",
    # An unplanned supply is an order: no supplyID (null) yet, its preorderID. A virtual
    # supply has a supplyID and preorderID 0. The pair is unique either way.
    key=(
        KeyField("preorder_id", "preorderID"),
        KeyField("supply_id", "supplyID", missing=0),
    ),
    kind="snapshot",
    data_schema={
        "type": "object",
        "properties": {
            "supplyID": {"type": ["integer", "null"]},
            "preorderID": {"type": "integer"},
            "phone": {"type": "string"},
            "createDate": {"type": "string", "format": "date-time"},
            "supplyDate": {"type": ["string", "null"], "format": "date-time"},
            "factDate": {"type": ["string", "null"], "format": "date-time"},
            "updatedDate": {"type": ["string", "null"], "format": "date-time"},
            "statusID": {"type": "integer", "enum": [1, 2, 3, 4, 5, 6]},
            "boxTypeID": {"type": "integer"},
            "isBoxOnPallet": {"type": "boolean"},
        },
    },
)


def supplies(client: WbClient, *, offset: int = 0) -> AsyncIterator[Page]:
    """Every supply of the cabinet, ``PAGE_LIMIT`` at a time from ``offset``."""

    async def fetch(limit: int, offset: int) -> list[Row]:
        reply = await client.call(LIST, params={"limit": limit, "offset": offset}, json={})
        return rows_at(reply, LIST)

    # WB does not promise full pages before the end: stop on the empty one.
    return offset_pages(fetch, limit=PAGE_LIMIT, offset=offset, stop_short=False)


class SuppliesCursor(CursorShape):
    """The next offset in the list; any other cursor is refused."""

    offset: Count


async def pages(inp: SyncInput) -> AsyncIterator[SyncPage]:
    """The list from the start (or the resumed job's offset), page by page."""
    offset = inp.cursor["offset"] if inp.cursor else 0
    async for page in supplies(inp.client, offset=offset):
        yield SyncPage("supplies", page.rows, {"offset": page.cursor})


SYNC = Sync(
    name="wb-supplies-sync",
    long=True,  # a Base token gets 2 calls an hour: wait in BullMQ's delayed state
    interval_s=3600.0,
    calls=(LIST,),
    stores=(ROWS,),
    pages=pages,
    cursor=SuppliesCursor,
)
