"""Storage: cabinets, sync cursors, synced WB rows and send logs (SQLAlchemy async + Alembic).

Typical use::

    async with Database(settings.database_url) as db:
        await db.migrate()
        store = Store(db, secret_key=settings.secret_key_value())
        cabinet = await store.cabinets.add("shop", token, seller_id)
        await store.upsert("orders", cabinet.id, rows)   # writes only rows that changed
        page = await store.changes("orders", after=0)    # the change feed (docs/data.md)
"""

from wbsync.store.cabinet_repository import CabinetRepository
from wbsync.store.cabinets import AddManyResult, Cabinet, CabinetRef, NewCabinet
from wbsync.store.changes import FEED_PAGE_MAX, Change, ChangeEvent, ChangePage
from wbsync.store.cursors import CursorRepository
from wbsync.store.datasets import DATASETS, Dataset, KeyField
from wbsync.store.db import Database
from wbsync.store.ledger import Ledger, PriceTarget, PriceUpload, SentBid
from wbsync.store.retention import Pruned
from wbsync.store.rows import PageWrite
from wbsync.store.runs import CabinetOverview, RunRecord, RunRepository
from wbsync.store.snapshots import SnapshotRepository
from wbsync.store.store import Store
from wbsync.store.suspensions import Suspension, SuspensionRepository

__all__ = [
    "DATASETS",
    "FEED_PAGE_MAX",
    "AddManyResult",
    "Cabinet",
    "CabinetOverview",
    "CabinetRef",
    "CabinetRepository",
    "Change",
    "ChangeEvent",
    "ChangePage",
    "CursorRepository",
    "Database",
    "Dataset",
    "KeyField",
    "Ledger",
    "NewCabinet",
    "PageWrite",
    "PriceTarget",
    "PriceUpload",
    "Pruned",
    "RunRecord",
    "RunRepository",
    "SentBid",
    "SnapshotRepository",
    "Store",
    "Suspension",
    "SuspensionRepository",
]
