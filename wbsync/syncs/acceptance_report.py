"""acceptance-report-sync: WB's paid acceptance report, what WB charged to accept each supply.

Declared from WB's documents (Reports, "Paid Acceptance", ``seller-analytics-api``, category
Analytics): ``GET /api/v1/acceptance_report?dateFrom&dateTo`` creates a task for at most 31
days (1 a minute, burst 1; Base tokens 1 in 3 hours), ``.../tasks/{task_id}/status`` (1 per 5
s, burst 1; Base 2 an hour), ``.../tasks/{task_id}/download`` (1 a minute, burst 1; Base 2 an
hour). Rows: one per supply (``incomeId``), item (``nmID``) and day its goods were accepted
(``shkCreateDate``), with ``count`` and ``total`` (RUB).

History back to ``WBSYNC_SYNC_REPORT_HORIZON_DAYS`` in 31-day windows, then each run the last
``WBSYNC_SYNC_REPORT_RECENT_DAYS`` days again (``wbsync.syncs.reports.task``).
"""

from __future__ import annotations

from wbsync.store.datasets import Dataset, KeyField
from wbsync.syncs.reports.common import HOUR, MINUTE, endpoint
from wbsync.syncs.reports.task import ReportTask

WINDOW_DAYS = 31  # WB: "Maximum of report period is 31 days"

CREATE = endpoint(
    "analytics.acceptance_report", "/api/v1/acceptance_report", (MINUTE, 1, 1), (3 * HOUR, 1, 1)
)
STATUS = endpoint(
    "analytics.acceptance_report_status",
    "/api/v1/acceptance_report/tasks/{task_id}/status",
    (5.0, 1, 1),
    (HOUR, 2, 1),
)
DOWNLOAD = endpoint(
    "analytics.acceptance_report_download",
    "/api/v1/acceptance_report/tasks/{task_id}/download",
    (MINUTE, 1, 1),
    (HOUR, 2, 1),
)

ROWS = Dataset(
    name="acceptance_report",
    source="GET /api/v1/acceptance_report (a report task; one row per supply, item and day "
    "of acceptance)",
    key=(
        KeyField("income_id", "incomeId"),
        KeyField("nm_id", "nmID"),
        KeyField("date", "shkCreateDate", "date"),
    ),
    kind="stream",
    retention_days=400,
    data_schema={
        "type": "object",
        "properties": {
            "incomeId": {"type": "integer"},
            "nmID": {"type": "integer"},
            "shkCreateDate": {"type": "string", "format": "date"},
            "giCreateDate": {"type": "string", "format": "date"},
            "subjectName": {"type": "string"},
            "count": {"type": "integer"},
            "total": {"type": "number"},
        },
    },
)

REPORT = ReportTask(
    name="acceptance-report-sync",
    report="paid acceptance",
    create=CREATE,
    status=STATUS,
    download=DOWNLOAD,
    dataset=ROWS,
    interval_s=6 * 3600.0,
    window_days=WINDOW_DAYS,
)

SYNC = REPORT.sync()
