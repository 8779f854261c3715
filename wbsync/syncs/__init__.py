"""The built-in syncs: one module each, pulling a cabinet's data page by page through the
client, declared in ``SYNCS`` through the same registrar a plugin gets (``wbsync.extend``).

Long syncs (multi-page) are wrapped by the reschedule service in the job layer; short ones
(pricing-bulk, booking-slot-monitor) are not. The report task syncs (``wbsync.syncs.reports``)
are declared as a plugin declares a :class:`~wbsync.syncs.reports.ReportTask`; their tables come
from their declarations, as a plugin's do.
"""

from wbsync.errors import TokenError
from wbsync.registry import BUILTIN, Registrar
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
from wbsync.syncs.base import SYNCS, BidRule, Sync, SyncInput, SyncOptions, SyncPage
from wbsync.syncs.reports import acceptance, paid_storage, warehouse_remains
from wbsync.syncs.runner import SyncTotals, run_sync
from wbsync.wb.endpoints import check_token
from wbsync.wb.tokens import WbToken

# The order is the status page's queue order.
_builtin = Registrar(BUILTIN)
_builtin.declare(
    finance.SYNC,
    sections.SYNC,
    ads.SYNC,
    digitization.SYNC,
    inventory.SYNC,
    autobidder.SYNC,
    catalog.SYNC,
    pricing.SYNC,
    booking.SYNC,
    paid_storage.SYNC,
    warehouse_remains.SYNC,
    acceptance.SYNC,
)
_builtin.commit()


def unserved_queues(token: WbToken) -> dict[str, str]:
    """The queues ``token`` cannot serve, each with why (the first of its methods it may not
    call: a category it lacks, a token type WB refuses, read-only for a write)."""
    out: dict[str, str] = {}
    for name, sync in SYNCS.items():
        for ep in sync.calls:
            try:
                check_token(token, ep)
            except TokenError as exc:
                out[name] = str(exc)
                break
    return out


__all__ = [
    "SYNCS",
    "BidRule",
    "Sync",
    "SyncInput",
    "SyncOptions",
    "SyncPage",
    "SyncTotals",
    "run_sync",
    "unserved_queues",
]
