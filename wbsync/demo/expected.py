"""What a full run of each sync must store, as the emulator computes it (for tests and the demo).

Keyed by store dataset; windows as the syncs compute them from ``today`` and ``SyncOptions``.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import Any

from wbsync.emulator import Emulator
from wbsync.store.datasets import advert_stats_rows, funnel_history_rows
from wbsync.syncs import SyncOptions
from wbsync.syncs.autobidder import ACTIVE, biddable, campaign_items
from wbsync.syncs.reports.warehouse_remains import warehouse_rows

Rows = list[dict[str, Any]]


def _bids(emu: Emulator, seller: str) -> Rows:
    # The autobidder reads the bids of the active campaigns WB takes bids for; WB holds them
    # as it left them.
    pairs = {
        (c["id"], nm)
        for c in emu.expected(seller, "promotion.adverts")
        if c["status"] == ACTIVE and biddable(c)
        for nm in campaign_items(c)
    }
    return [
        b
        for b in emu.expected(seller, "promotion.get_bids")
        if (b["advert_id"], b["nm_id"]) in pairs
    ]


def expected_datasets(
    emu: Emulator, seller: str, *, today: date, options: SyncOptions
) -> dict[str, Rows]:
    """Every dataset's rows for ``seller`` after one run of every sync."""
    since = today - timedelta(days=options.lookback_days)
    begin = today - timedelta(days=options.stats_days - 1)
    statistics_from = datetime.combine(since, time()).isoformat()
    stats = emu.expected(seller, "promotion.fullstats", begin=begin, end=today)
    funnel_begin = today - timedelta(days=options.funnel_days - 1)
    funnel = emu.expected(seller, "analytics.sales_funnel_history", begin=funnel_begin, end=today)
    return {
        "finance_report": emu.expected(
            seller, "finance.detailed_report", date_from=since, date_to=today
        ),
        "orders": emu.expected(seller, "statistics.orders", date_from=statistics_from),
        "sales": emu.expected(seller, "statistics.sales", date_from=statistics_from),
        "adverts": emu.expected(seller, "promotion.adverts"),
        "advert_stats": [row for item in stats for row in advert_stats_rows(item)],
        "funnel_history": [row for item in funnel for row in funnel_history_rows(item)],
        "stocks": emu.expected(seller, "analytics.stocks_wb_warehouses"),
        "bids": _bids(emu, seller),
        "cards": emu.expected(seller, "content.cards_list"),
        "prices": emu.expected(seller, "prices.goods_list"),
        "acceptance_coefficients": emu.expected(seller, "tariffs.acceptance_coefficients"),
        **_report_tasks(emu, seller, today=today, options=options),
    }


def _report_tasks(
    emu: Emulator, seller: str, *, today: date, options: SyncOptions
) -> dict[str, Rows]:
    """The report tasks' datasets after a first run: the horizon's days, the whole stock."""
    since = today - timedelta(days=options.report_horizon_days - 1)
    items = emu.expected(seller, "analytics.warehouse_remains")
    return {
        "paid_storage": emu.expected(
            seller, "analytics.paid_storage", date_from=since, date_to=today
        ),
        "acceptance_report": emu.expected(
            seller, "analytics.acceptance_report", date_from=since, date_to=today
        ),
        "warehouse_remains": [row for item in items for row in warehouse_rows(item)],
    }
