"""booking-slot-monitor: acceptance coefficients (free supply slots), polled often.

A short queue: one request a run, not wrapped by the reschedule service (a long wait follows
the no-context policy: sleep up to the ceiling, then fail the attempt).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from wbsync.store.datasets import Dataset, KeyField
from wbsync.syncs.base import CursorShape, Sync, SyncInput, SyncPage
from wbsync.wb.methods import TARIFFS_ACCEPTANCE_COEFFICIENTS, acceptance_coefficients

# Every warehouse's coming days, each poll: a day or slot WB stopped offering is gone.
ACCEPTANCE_COEFFICIENTS = Dataset(
    name="acceptance_coefficients",
    source="GET /api/tariffs/v1/acceptance/coefficients",
    # WB omits boxTypeID for QR-delivery with boxes; 0 is no real box type.
    key=(
        KeyField("warehouse_id", "warehouseID"),
        KeyField("date", "date", "date"),
        KeyField("box_type_id", "boxTypeID", missing=0),
    ),
    kind="snapshot",
    retention_days=30,
)


class BookingCursor(CursorShape):
    """One request a run: nothing to resume."""


async def pages(inp: SyncInput) -> AsyncIterator[SyncPage]:
    """All warehouses' coefficients for the coming days: the whole snapshot in one reply."""
    rows = await acceptance_coefficients(inp.client)
    yield SyncPage("acceptance_coefficients", rows, {}, whole=True)


SYNC = Sync(
    name="booking-slot-monitor",
    calls=(TARIFFS_ACCEPTANCE_COEFFICIENTS,),
    long=False,
    interval_s=60,
    stores=(ACCEPTANCE_COEFFICIENTS,),
    pages=pages,
    cursor=BookingCursor,
    # Most of a deployment's runs (one a minute per cabinet): 10 slots a process held the load
    # of 10,000 cabinets on two cores where the default 5 did not (docs/scaling.md).
    concurrency=10,
)
