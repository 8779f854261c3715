"""What a full run of each sync must store, as the emulator computes it (for tests and the demo).

Read from the registry, not listed here: each registered sync's datasets, each filled by the WB
method of the sync's whose verb and path its ``source`` names (a built-in's or a plugin's,
under the name the emulator serves it by), and that method's expectation in the emulator
(``/__emulator/expected``). A dataset whose method declares no expectation is left out.

Every expectation gets one window, the syncs' lookback (``SyncOptions.lookback_days`` to
``today``), under each name the emulated methods read it by: ``date_from``/``date_to`` and
``begin``/``end``. The syncs that pull a shorter window (the campaigns' statistics, the sales
funnel) store the same rows when the emulator's dated history (``SellerSizes.days``) is no
longer than their window, which the demo's emulator keeps (``history_days``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, timedelta
from typing import Any

from wbsync.emulator import Emulator
from wbsync.emulator.extend import EXPECTED
from wbsync.store import Dataset
from wbsync.syncs import SYNCS, Sync, SyncOptions
from wbsync.syncs.ads import advert_stats_rows
from wbsync.syncs.autobidder import ACTIVE, biddable, campaign_items
from wbsync.syncs.digitization import funnel_history_rows
from wbsync.syncs.reports import ReportCursor
from wbsync.syncs.warehouse_remains import warehouse_rows

Rows = list[dict[str, Any]]


def _bids(emu: Emulator, seller: str, bids: Rows) -> Rows:
    # The autobidder reads the bids of the active campaigns WB takes bids for; WB holds them
    # as it left them.
    pairs = {
        (c["id"], nm)
        for c in emu.expected(seller, "promotion.adverts")
        if c["status"] == ACTIVE and biddable(c)
        for nm in campaign_items(c)
    }
    return [b for b in bids if (b["advert_id"], b["nm_id"]) in pairs]


def _split(split: Callable[[dict[str, Any]], Rows]) -> Callable[[Emulator, str, Rows], Rows]:
    return lambda _emu, _seller, rows: [row for item in rows for row in split(item)]


#: The datasets whose stored rows are not their method's rows one for one: how their sync cuts
#: them (WB's items split per day, as their syncs' functions do; the autobidder's bids).
CUTS: dict[str, Callable[[Emulator, str, Rows], Rows]] = {
    "advert_stats": _split(advert_stats_rows),
    "funnel_history": _split(funnel_history_rows),
    "bids": _bids,
    "warehouse_remains": _split(warehouse_rows),
}


def filling_method(sync: Sync, dataset: Dataset) -> str | None:
    """The name of the WB method of ``sync`` whose verb and path ``dataset.source`` names."""
    for ep in (*sync.calls, *sync.also_calls):
        route = f"{ep.method} {ep.path}"
        if dataset.source == route or dataset.source.startswith(route + " "):
            return ep.name
    return None


def expected_methods() -> dict[str, str]:
    """Each registered dataset the emulator computes the rows of, with its method's name."""
    found = {}
    for sync in SYNCS.values():
        for dataset in sync.stores:
            method = filling_method(sync, dataset)
            if method is not None and method in EXPECTED:
                found[dataset.name] = method
    return found


def window(today: date, options: SyncOptions) -> dict[str, str]:
    """The lookback window, under each name the emulator's expectations read it by."""
    since = today - timedelta(days=options.lookback_days)
    return {
        # Moscow's wall time, as WB's statistics read a moment with no offset.
        "date_from": f"{since.isoformat()}T00:00:00",
        "date_to": f"{today.isoformat()}T23:59:59Z",
        "begin": since.isoformat(),
        "end": today.isoformat(),
    }


def reaching_back() -> set[str]:
    """The datasets of dated report tasks: a first run reaches back the report horizon
    (``SyncOptions.report_horizon_days``), not the lookback."""
    return {
        ds.name
        for sync in SYNCS.values()
        if sync.cursor is ReportCursor and sync.incremental
        for ds in sync.stores
    }


def expected_datasets(
    emu: Emulator, seller: str, *, today: date, options: SyncOptions
) -> dict[str, Rows]:
    """Every dataset's rows for ``seller`` after one run of every sync (those
    :func:`expected_methods` finds)."""
    params = window(today, options)
    horizon = {**params, "date_from": today - timedelta(days=options.report_horizon_days - 1)}
    back = reaching_back()
    out = {}
    for dataset, method in expected_methods().items():
        rows = emu.expected(seller, method, **(horizon if dataset in back else params))
        cut = CUTS.get(dataset)
        out[dataset] = rows if cut is None else cut(emu, seller, rows)
    return out
