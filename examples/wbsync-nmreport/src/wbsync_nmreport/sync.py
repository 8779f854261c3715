"""wb-nm-report-sync: WB's sales funnel by item and day, a seller-analytics CSV report task.

Declared from WB's documents (Analytics, "Seller Analytics CSV", ``seller-analytics-api``,
category Analytics, read-only): ``POST /api/v2/nm-report/downloads`` creates a report from a
JSON body holding the seller's own id (a UUID), its ``reportType`` and its ``params``, and
answers only that WB started; ``GET /api/v2/nm-report/downloads`` lists the seller's reports
with their ``status`` (``WAITING``, ``PROCESSING``, ``SUCCESS``, ``RETRY``, ``FAILED``),
``filter[downloadIds]`` naming the ones wanted; ``GET
/api/v2/nm-report/downloads/file/{downloadId}`` answers the built report, a ZIP archive of one
CSV file, for 48 hours. Each of the three: 3 a minute, burst 3; Base tokens 1 an hour. WB
builds at most 20 reports a seller a day, and a report covers at most a year.

The report is ``DETAIL_HISTORY_REPORT`` (the sales funnel by WB item, by day): one CSV row per
item (``nmID``) and day (``dt``) with the funnel's counts and sums. History back to
``WBSYNC_SYNC_REPORT_HORIZON_DAYS`` in 31-day windows (90 days: 3 reports), then each run the
last ``WBSYNC_SYNC_REPORT_RECENT_DAYS`` days again (one report a run, 4 a day at the default
interval, well within WB's 20). A window is items x 31 rows: within the default
``WBSYNC_WB_MAX_CSV_ROWS`` (200,000) up to some 6,400 items. WB's ``FAILED`` is a report WB
lost: created again, with a new id, like any lost task.
"""

from __future__ import annotations

from typing import Any, Literal

from wbsync.extend import (
    Category,
    Dataset,
    Endpoint,
    KeyField,
    Limit,
    NoData,
    ReportTask,
    Section,
    TaskStates,
    TypeLimits,
    WbReply,
    Window,
    bad_reply,
    rows_at,
)

REPORT_TYPE = "DETAIL_HISTORY_REPORT"
WINDOW_DAYS = 31

# The same host as wbsync's analytics methods: declaring it again, identically, is allowed.
ANALYTICS = Section("analytics", "seller-analytics-api")

# WB's table for each of the three methods.
_LIMITS = TypeLimits.same(
    Limit(period_s=60.0, limit=3, burst=3), base=Limit(period_s=3600.0, limit=1, burst=1)
)

#: WB's answer for a file of a report it does not have (never made, or past its 48 hours): the
#: report is lost, not the path wrong.
UNKNOWN_REPORT = NoData(400, "report not found")


def _endpoint(name: str, method: Literal["GET", "POST"], path: str, **more: Any) -> Endpoint:
    """One of the three methods: its own limit group, WB's table."""
    return Endpoint(
        name=name,
        section=ANALYTICS,
        method=method,
        path=path,
        group=name,
        category=Category.ANALYTICS,
        limits=_LIMITS,
        **more,
    )


CREATE = _endpoint("analytics.nm_report_create", "POST", "/api/v2/nm-report/downloads")
LIST = _endpoint("analytics.nm_report_list", "GET", "/api/v2/nm-report/downloads")
# WB names the path's id ``downloadId``; a ReportTask puts the task's id at ``{task_id}``.
FILE = _endpoint(
    "analytics.nm_report_file",
    "GET",
    "/api/v2/nm-report/downloads/file/{task_id}",
    reply="zip-csv",
    no_data=(UNKNOWN_REPORT,),
)

ROWS = Dataset(
    name="nm_report_history",
    source=f"POST /api/v2/nm-report/downloads (a report task, {REPORT_TYPE}: one row per item "
    "and day)",
    key=(KeyField("nm_id", "nmID"), KeyField("date", "dt", "date")),
    # Each run replaces the days of its windows (rows WB no longer reports for them are
    # tombstoned by the report task), and never judges other days: a stream.
    kind="stream",
    retention_days=400,
    # The CSV's columns as WB documents them: the cells are typed by it (text otherwise).
    data_schema={
        "type": "object",
        "properties": {
            "nmID": {"type": "integer"},
            "dt": {"type": "string", "format": "date"},
            "openCardCount": {"type": "integer"},
            "addToCartCount": {"type": "integer"},
            "ordersCount": {"type": "integer"},
            "ordersSumRub": {"type": "integer"},
            "buyoutsCount": {"type": "integer"},
            "buyoutsSumRub": {"type": "integer"},
            "cancelCount": {"type": "integer"},
            "cancelSumRub": {"type": "integer"},
            "addToCartConversion": {"type": "number"},
            "cartToOrderConversion": {"type": "integer"},
            "buyoutPercent": {"type": "integer"},
            "addToWishlist": {"type": "integer"},
            "currency": {"type": "string"},
        },
    },
)


def detail_history(window: Window | None, task_id: str) -> dict[str, Any]:
    """The create's body: our id for the report, its type, and the window by day."""
    assert window is not None  # a dated report
    return {
        "id": task_id,
        "reportType": REPORT_TYPE,
        "userReportName": f"wbsync {window.first.isoformat()}..{window.last.isoformat()}",
        "params": {
            "startDate": window.first.isoformat(),
            "endDate": window.last.isoformat(),
            "aggregationLevel": "day",
            "timezone": "Europe/Moscow",
        },
    }


def by_id(task_id: str) -> dict[str, Any]:
    """The list asked for the one report."""
    return {"filter[downloadIds]": [task_id]}


def listed_status(reply: WbReply, ep: Endpoint, task_id: str) -> str | None:
    """The report's status in WB's list (``data``: ``id``, ``status``, ...); None when the list
    does not hold it (unknown to WB)."""
    for report in rows_at(reply, ep, "data"):
        if report.get("id") == task_id:
            status = report.get("status")
            if not isinstance(status, str):
                raise bad_reply(reply, ep, f"expected a status for report {task_id} in data")
            return status
    return None


REPORT = ReportTask(
    name="wb-nm-report-sync",
    report="sales funnel by item",
    create=CREATE,
    status=LIST,
    download=FILE,
    dataset=ROWS,
    interval_s=6 * 3600.0,
    window_days=WINDOW_DAYS,
    create_body=detail_history,
    status_params=by_id,
    status_of=listed_status,
    states=TaskStates(
        building=frozenset({"WAITING", "PROCESSING", "RETRY"}), done=frozenset({"SUCCESS"})
    ),
)

SYNC = REPORT.sync()
