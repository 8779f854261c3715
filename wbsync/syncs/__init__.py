"""The nine syncs: one module each, pulling a cabinet's data page by page through the client.

Long syncs (multi-page) are wrapped by the reschedule service in the job layer; short ones
(pricing-bulk, booking-slot-monitor) are not.
"""

from wbsync.syncs import (
    ads,
    autobidder,
    booking,
    catalog,
    digitization,
    finance,
    inventory,
    pricing,
    sections,
)
from wbsync.syncs.base import BidRule, Sync, SyncInput, SyncOptions, SyncPage
from wbsync.syncs.runner import SyncTotals, run_sync

SYNCS: dict[str, Sync] = {
    sync.name: sync
    for sync in (
        finance.SYNC,
        sections.SYNC,
        ads.SYNC,
        digitization.SYNC,
        inventory.SYNC,
        autobidder.SYNC,
        catalog.SYNC,
        pricing.SYNC,
        booking.SYNC,
    )
}

__all__ = [
    "SYNCS",
    "BidRule",
    "Sync",
    "SyncInput",
    "SyncOptions",
    "SyncPage",
    "SyncTotals",
    "run_sync",
]
