"""wb-tariffs-sync: WB's tariffs, the same for every seller, fetched once for the whole fleet.

Declared from WB's documents (Rates, ``https://common-api.wildberries.ru``, a token of any
category) with the public declarations a plugin uses (``wbsync.extend``'s types):

* ``GET /api/v1/tariffs/box`` and ``/api/v1/tariffs/pallet``: each warehouse's box and pallet
  rates for a ``date`` (``YYYY-MM-DD``, required), in ``response.data.warehouseList``;
* ``GET /api/v1/tariffs/return``: each warehouse's return rates for a ``date``, same place;
* ``GET /api/v1/tariffs/commission``: WB's fee per item subject and sales model, in
  ``report`` (``locale`` names the language of the names).

WB's limits per seller: box, pallet and return 60 a minute (burst 5), Base tokens 1 an hour;
commission 1 a minute (burst 2), Base tokens 5 an hour (burst 1).

Its datasets are fleet-wide (``scope="fleet"``): one run per interval for the fleet, with the
token of one cabinet that may ask (docs/data.md, "Fleet-wide datasets"). A warehouse's rates
are kept per date (WB's row plus the ``date`` asked and the reply's dates of the next rates),
so the tables are the history of WB's rates, pruned after a year; the commission is one reply
of every subject, so a subject WB no longer lists is tombstoned. The cursor is the step: a run
deferred on a bucket resumes at the method it stopped before.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import date

# The types wbsync.extend gives a plugin, from their own modules (extend imports this package).
from wbsync.store.datasets import Dataset, KeyField
from wbsync.syncs.base import Count, CursorShape, Sync, SyncInput, SyncPage
from wbsync.values.scope import Limit
from wbsync.wb.client import WbClient
from wbsync.wb.endpoints import Endpoint, Section, TypeLimits
from wbsync.wb.paging import Row, bad_reply, rows_at

#: The language of the commission's names (WB: ``ru``, ``en`` or ``zh``).
LOCALE = "ru"
#: Days of rates kept: a year of WB's tariffs, the history a seller compares a season with.
RETENTION_DAYS = 400

# common-api: "Rates, News, Get Seller Information", a token of any category (declared again,
# identically, as a plugin would).
TARIFFS = Section("tariffs", "common-api")

_MINUTE, _HOUR = 60.0, 3600.0
_RATES = TypeLimits.same(Limit(_MINUTE, 60, 5), base=Limit(_HOUR, 1, 1))


def _rates(name: str, path: str) -> Endpoint:
    return Endpoint(
        name=f"tariffs.{name}",
        section=TARIFFS,
        method="GET",
        path=path,
        group=f"tariffs.{name}",
        category=None,
        limits=_RATES,
    )


BOX = _rates("box", "/api/v1/tariffs/box")
PALLET = _rates("pallet", "/api/v1/tariffs/pallet")
RETURN = _rates("return", "/api/v1/tariffs/return")
COMMISSION = Endpoint(
    name="tariffs.commission",
    section=TARIFFS,
    method="GET",
    path="/api/v1/tariffs/commission",
    group="tariffs.commission",
    category=None,
    limits=TypeLimits.same(Limit(_MINUTE, 1, 2), base=Limit(_HOUR, 5, 1)),
)

_BY_WAREHOUSE_DAY = (
    KeyField("warehouse_name", "warehouseName", "str"),
    KeyField("date", "date", "date"),
)


def _per_day(name: str, path: str, what: str) -> Dataset:
    return Dataset(
        name=name,
        source=f"GET {path} (one row per warehouse per date)",
        key=_BY_WAREHOUSE_DAY,
        # A run asks for today's rates: the days before stay as WB gave them (history).
        kind="stream",
        retention_days=RETENTION_DAYS,
        scope="fleet",
        data_schema={
            "type": "object",
            "description": what,
            "properties": {
                "warehouseName": {"type": "string"},
                "date": {"type": "string", "format": "date", "description": "The date asked"},
            },
        },
    )


BOX_RATES = _per_day("tariffs_box", BOX.path, "WB's box rates of a warehouse on a date")
PALLET_RATES = _per_day("tariffs_pallet", PALLET.path, "WB's pallet rates of a warehouse")
RETURN_RATES = _per_day("tariffs_return", RETURN.path, "WB's return rates of a warehouse")
COMMISSIONS = Dataset(
    name="tariffs_commission",
    source=f"GET {COMMISSION.path}",
    key=(KeyField("subject_id", "subjectID"),),
    # One reply holds every subject: one WB no longer lists is gone.
    kind="snapshot",
    scope="fleet",
    data_schema={
        "type": "object",
        "properties": {
            "parentID": {"type": "integer"},
            "parentName": {"type": "string"},
            "subjectName": {"type": "string"},
        },
    },
)


async def warehouse_rates(client: WbClient, ep: Endpoint, day: date) -> list[Row]:
    """Every warehouse's rates of ``ep`` for ``day``, each with the date asked and the reply's
    own fields (currency, the dates of the next rates)."""
    on = day.isoformat()
    reply = await client.call(ep, params={"date": on})
    response = reply.data.get("response") if isinstance(reply.data, dict) else None
    data = response.get("data") if isinstance(response, dict) else None
    if not isinstance(data, dict):
        raise bad_reply(reply, ep, "expected an object at response.data")
    # WB documents warehouseList as nullable: no warehouse that day.
    rows = (
        []
        if data.get("warehouseList") is None
        else rows_at(reply, ep, "response", "data", "warehouseList")
    )
    shared = {k: v for k, v in data.items() if k != "warehouseList"}
    return [{**shared, **row, "date": on} for row in rows]


async def commissions(client: WbClient) -> list[Row]:
    """WB's fee of every subject (names in ``LOCALE``)."""
    reply = await client.call(COMMISSION, params={"locale": LOCALE})
    return rows_at(reply, COMMISSION, "report")


class TariffsCursor(CursorShape):
    """The next step of the run (0: box, 1: pallet, 2: return, 3: commission)."""

    step: Count


_DAILY = ((BOX, BOX_RATES), (PALLET, PALLET_RATES), (RETURN, RETURN_RATES))


async def pages(inp: SyncInput) -> AsyncIterator[SyncPage]:
    """Today's box, pallet and return rates, then every subject's fee: a page each."""
    step = (inp.cursor or {}).get("step", 0)
    for index, (ep, ds) in enumerate(_DAILY):
        if index >= step:
            rows = await warehouse_rates(inp.client, ep, inp.today)
            yield SyncPage(ds.name, rows, {"step": index + 1})
    if step <= len(_DAILY):
        rows = await commissions(inp.client)
        yield SyncPage(COMMISSIONS.name, rows, {"step": len(_DAILY) + 1}, whole=True)


SYNC = Sync(
    name="wb-tariffs-sync",
    # Long: a run's four requests may wait for a bucket, and a wait past the threshold gives
    # the slot back (the commission's bucket refills once a minute).
    long=True,
    interval_s=_HOUR,
    calls=(BOX, PALLET, RETURN, COMMISSION),
    stores=(BOX_RATES, PALLET_RATES, RETURN_RATES, COMMISSIONS),
    pages=pages,
    cursor=TariffsCursor,
)
