"""paid-storage-sync: WB's paid storage report, the daily storage cost per item and warehouse.

Declared from WB's documents (Reports, "Paid Storage", ``seller-analytics-api``, category
Analytics): ``GET /api/v1/paid_storage?dateFrom&dateTo`` creates a task for at most 8 days (1
a minute, burst 5; Base tokens 1 an hour), ``.../tasks/{task_id}/status`` (1 per 5 s, burst 5;
Base 2 an hour, burst 2), ``.../tasks/{task_id}/download`` (1 a minute, burst 1; Base 2 an
hour). Rows: one per day (``date``, the calculation or recalculation date), item size
(``nmId``, ``chrtId``), shipment (``giId``) and warehouse (``warehouse``; WB's release 570 has
it ``Склад WB РФ`` for every row for now), with ``warehousePrice`` the day's cost.

History back to ``WBSYNC_SYNC_REPORT_HORIZON_DAYS`` in 8-day windows, then each run the last
``WBSYNC_SYNC_REPORT_RECENT_DAYS`` days again (``wbsync.syncs.reports.task``).
"""

from __future__ import annotations

from wbsync.store.datasets import Dataset, KeyField
from wbsync.syncs.reports.common import HOUR, MINUTE, endpoint
from wbsync.syncs.reports.task import ReportTask

WINDOW_DAYS = 8  # WB: "Maximum of report period — 8 days"

CREATE = endpoint("analytics.paid_storage", "/api/v1/paid_storage", (MINUTE, 1, 5), (HOUR, 1, 1))
STATUS = endpoint(
    "analytics.paid_storage_status",
    "/api/v1/paid_storage/tasks/{task_id}/status",
    (5.0, 1, 5),
    (HOUR, 2, 2),
)
DOWNLOAD = endpoint(
    "analytics.paid_storage_download",
    "/api/v1/paid_storage/tasks/{task_id}/download",
    (MINUTE, 1, 1),
    (HOUR, 2, 1),
)

ROWS = Dataset(
    name="paid_storage",
    source="GET /api/v1/paid_storage (a report task; one row per day, item size, shipment "
    "and warehouse)",
    key=(
        KeyField("date", "date", "date"),
        KeyField("nm_id", "nmId"),
        KeyField("chrt_id", "chrtId"),
        KeyField("gi_id", "giId", missing=0),
        KeyField("warehouse", "warehouse", "str", missing=""),
    ),
    # Each run replaces the days of its windows (rows WB no longer reports for them are
    # tombstoned by the report task), and never judges other days: a stream.
    kind="stream",
    retention_days=400,
    data_schema={
        "type": "object",
        "properties": {
            "date": {"type": "string", "format": "date"},
            "originalDate": {"type": "string", "format": "date"},
            "nmId": {"type": "integer"},
            "chrtId": {"type": "integer"},
            "giId": {"type": "integer"},
            "warehouse": {"type": "string"},
            "officeId": {"type": "integer"},
            "barcode": {"type": "string"},
            "barcodesCount": {"type": "integer"},
            "vendorCode": {"type": "string"},
            "brand": {"type": "string"},
            "subject": {"type": "string"},
            "size": {"type": "string"},
            "calcType": {"type": "string"},
            "volume": {"type": "number"},
            "warehouseCoef": {"type": "number"},
            "logWarehouseCoef": {"type": "number"},
            "warehousePrice": {"type": "number"},
            "loyaltyDiscount": {"type": "number"},
            "palletCount": {"type": "number"},
            "palletPlaceCode": {"type": "integer"},
            "tariffFixDate": {"type": "string"},
            "tariffLowerDate": {"type": "string"},
        },
    },
)

REPORT = ReportTask(
    name="paid-storage-sync",
    report="paid storage",
    create=CREATE,
    status=STATUS,
    download=DOWNLOAD,
    dataset=ROWS,
    interval_s=6 * 3600.0,
    window_days=WINDOW_DAYS,
)

SYNC = REPORT.sync()
