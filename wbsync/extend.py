"""What a plugin needs to add a sync to wbsync: the public surface, and only it.

A plugin is an installed package with an entry point in the ``wbsync.plugins`` group naming a
callable that takes a :class:`Registrar` and declares its syncs on it (docs/extending.md)::

    [project.entry-points."wbsync.plugins"]
    deductions = "wbsync_deductions:register"

    def register(registrar: Registrar) -> None:
        registrar.declare(SYNC)

A :class:`Sync` brings what it calls (:class:`Endpoint`, each in a :class:`Section` with its
:class:`TypeLimits`) and what it stores (:class:`Dataset` with its :class:`KeyField` natural
key, its :data:`DatasetKind`, snapshot or stream, its retention, and its :data:`DatasetScope`:
each cabinet's own rows, or the fleet's, stored once), so declaring the sync declares them all.
A WB report served as a task (create, poll the status, download once) is a
:class:`ReportTask`, whose ``sync()`` is its :class:`Sync` (``Window``, ``date_params``,
``download_rows``, ``task_id_of``, ``task_status``, :class:`TaskStates` and ``TASK_STATES``
shape it; ``ReportPending`` is its deferral while WB builds the report, ``WbReportError`` its
failure). An :class:`Endpoint` whose reply is a ZIP archive of a CSV file declares it
(:data:`ReplyKind`, ``reply="zip-csv"``). The built-in syncs are declared with exactly these
types, each in its own module, and registered through the same :class:`Registrar`. Everything
not listed in ``__all__`` is private to wbsync and may change without notice.

The registered tables (:data:`SYNCS`, :data:`ENDPOINTS`, :data:`DATASETS`, :data:`SECTIONS`,
:data:`GROUPS`) are live, read-only mappings: read them when needed, never copy them at import.

A declared dataset gets its standard table from ``wbsync migrate`` with no migration code (its
rows written only when they change, in the change feed, tombstoned and pruned as declared;
docs/data.md); a plugin that needs more declares an :class:`AlembicBranch` of its own revisions.
"""

from __future__ import annotations

from wbsync.catalog.registry import BUILTIN, Registrar, Table
from wbsync.errors import RateLimitDeferred, ReportPending, WbApiError, WbReportError
from wbsync.observability.context import deferral_threshold_ms, run_with_rate_limit_deferral
from wbsync.store.datasets import (
    DATASETS,
    KEY_STR_MAX,
    TOMBSTONE_GRACE_DAYS,
    Dataset,
    DatasetKind,
    DatasetScope,
    KeyField,
    KeyKind,
)
from wbsync.store.declared import AlembicBranch
from wbsync.syncs.base import (
    SYNCS,
    Count,
    Cursor,
    CursorShape,
    Flag,
    Sync,
    SyncInput,
    SyncOptions,
    SyncPage,
    Text,
    optional,
)
from wbsync.syncs.reports import (
    TASK_STATES,
    ReportTask,
    TaskStates,
    Window,
    date_params,
    download_rows,
    task_id_of,
    task_status,
)
from wbsync.values.scope import Limit
from wbsync.wb.client import WbClient
from wbsync.wb.endpoints import (
    ENDPOINTS,
    GROUPS,
    SECTIONS,
    Endpoint,
    NoData,
    ReplyKind,
    Section,
    TypeLimits,
)
from wbsync.wb.paging import (
    Page,
    Row,
    bad_reply,
    batch_pages,
    batches,
    key_pages,
    offset_pages,
    rows_at,
)
from wbsync.wb.replies import WbReply
from wbsync.wb.tokens import Category, TokenType

__all__ = [
    "BUILTIN",
    "DATASETS",
    "ENDPOINTS",
    "GROUPS",
    "KEY_STR_MAX",
    "SECTIONS",
    "SYNCS",
    "TASK_STATES",
    "TOMBSTONE_GRACE_DAYS",
    "AlembicBranch",
    "Category",
    "Count",
    "Cursor",
    "CursorShape",
    "Dataset",
    "DatasetKind",
    "DatasetScope",
    "Endpoint",
    "Flag",
    "KeyField",
    "KeyKind",
    "Limit",
    "NoData",
    "Page",
    "RateLimitDeferred",
    "Registrar",
    "ReplyKind",
    "ReportPending",
    "ReportTask",
    "Row",
    "Section",
    "Sync",
    "SyncInput",
    "SyncOptions",
    "SyncPage",
    "Table",
    "TaskStates",
    "Text",
    "TokenType",
    "TypeLimits",
    "WbApiError",
    "WbClient",
    "WbReply",
    "WbReportError",
    "Window",
    "bad_reply",
    "batch_pages",
    "batches",
    "date_params",
    "deferral_threshold_ms",
    "download_rows",
    "key_pages",
    "offset_pages",
    "optional",
    "rows_at",
    "run_with_rate_limit_deferral",
    "task_id_of",
    "task_status",
]
