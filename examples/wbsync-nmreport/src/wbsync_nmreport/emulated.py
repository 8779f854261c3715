"""WB's seller-analytics CSV reports in wbsync's emulator, written from WB's documents.

Analytics, "Seller Analytics CSV", on ``seller-analytics-api`` (category Analytics), each
method 3 a minute (burst 3), Base tokens 1 an hour:

- ``POST /api/v2/nm-report/downloads``: a JSON body with the seller's ``id`` for the report (a
  UUID), its ``reportType`` and ``params`` (``startDate``, ``endDate``, ``aggregationLevel``,
  ``nmIDs``, ...); answers ``{"data": "Началось формирование файла/отчета"}``. A period
  longer than a year, or ending before it starts, is a 400.
- ``GET /api/v2/nm-report/downloads``: ``{"data": [...]}``, the seller's reports (``id``,
  ``status``, ``name``, ``size``, ``startDate``, ``endDate``, ``createdAt``), those of
  ``filter[downloadIds]`` when given.
- ``GET /api/v2/nm-report/downloads/file/{downloadId}``: the built report, a ZIP archive of one
  CSV file (comma-separated, a header line, UTF-8), for 48 hours after it is built.

The emulator's readings where WB's documents say nothing: it builds ``DETAIL_HISTORY_REPORT``
(the sales funnel by item, by day) only, by day only (another type or aggregation is a 400
saying so); a report is ``WAITING``, then ``PROCESSING``, then ``SUCCESS`` on the clock of the
emulator's report tasks (``EmulatorConfig.report_tasks``: built 20 WB-seconds after its
creation by default), and is gone (not listed) 48 hours later; an id used twice is a 400; the
file of a report the seller does not have (never made, gone) or not yet built is a 400
(``report not found``, ``report is not ready``), the one error WB documents for it. A report's
rows are taken when it is created (the report WB builds is of that moment).
"""

from __future__ import annotations

import csv
import io
import time
import uuid
import zipfile
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from typing import Any

from starlette.responses import Response

from wbsync.emulator.extend import (
    BadRequest,
    Call,
    EmulatedMethod,
    Kind,
    Method,
    Rate,
    Row,
    SellerData,
    SellerState,
    json_reply,
)

REPORT_TYPE = "DETAIL_HISTORY_REPORT"
MAX_DAYS = 365  # WB: "You can get a report for a maximum of one year"
KEPT_S = 48 * 3600.0  # WB: "The report is stored for 48 hours after it is ready"
STARTED = "Началось формирование файла/отчета"
# The CSV's columns, in WB's documented order.
COLUMNS = (
    "nmID",
    "dt",
    "openCardCount",
    "addToCartCount",
    "ordersCount",
    "ordersSumRub",
    "buyoutsCount",
    "buyoutsSumRub",
    "cancelCount",
    "cancelSumRub",
    "addToCartConversion",
    "cartToOrderConversion",
    "buyoutPercent",
    "addToWishlist",
    "currency",
)
MOSCOW = timezone(timedelta(hours=3))
_RATES = {
    Kind.PERSONAL: Rate(60.0, 3, 3),
    Kind.SERVICE: Rate(60.0, 3, 3),
    Kind.TEST: Rate(60.0, 3, 3),
    Kind.BASE: Rate(3600.0, 1, 1),
}
_KEY = "analytics.nm_report"  # the seller state's plugins key


def _method(name: str, verb: str, path: str) -> Method:
    return Method(
        name=name,
        verb=verb,
        path=path,
        host="seller-analytics-api",
        category="analytics",
        rates=_RATES,
        group=name,
        x_category="contentanalytics",
    )


CREATE = _method("analytics.nm_report_create", "POST", "/api/v2/nm-report/downloads")
LIST = _method("analytics.nm_report_list", "GET", "/api/v2/nm-report/downloads")
FILE = _method("analytics.nm_report_file", "GET", "/api/v2/nm-report/downloads/file/{downloadId}")


@dataclass
class _Report:
    id: str
    name: str
    start: date
    end: date
    created: float  # time.monotonic()
    created_at: str  # Moscow's wall time, as WB lists it
    rows: list[Row]
    archive: bytes | None = field(default=None, repr=False)


def history_rows(data: SellerData, first: date, last: date) -> list[Row]:
    """The seller's funnel by item and day from ``first`` to ``last`` (to its last day at
    most), oldest first, typed as WB documents the CSV's columns."""
    rows: list[Row] = []
    day = first
    while day <= min(last, data.last_day):
        r = data.rng(f"nm_report:{day.isoformat()}")  # a day's rows whatever the window
        for p in data.products:
            opens = r.randrange(0, 400)
            carts = r.randrange(0, opens // 4 + 1)
            orders = r.randrange(0, carts + 1)
            buyouts = r.randrange(0, orders + 1)
            cancels = r.randrange(0, orders - buyouts + 1)
            rows.append(
                {
                    "nmID": p.nm_id,
                    "dt": day.isoformat(),
                    "openCardCount": opens,
                    "addToCartCount": carts,
                    "ordersCount": orders,
                    "ordersSumRub": orders * p.price,
                    "buyoutsCount": buyouts,
                    "buyoutsSumRub": buyouts * p.price,
                    "cancelCount": cancels,
                    "cancelSumRub": cancels * p.price,
                    "addToCartConversion": round(100.0 * carts / opens, 1) if opens else 0.0,
                    "cartToOrderConversion": round(100 * orders / carts) if carts else 0,
                    "buyoutPercent": round(100 * buyouts / orders) if orders else 0,
                    "addToWishlist": r.randrange(0, 30),
                    "currency": "RUB",
                }
            )
        day += timedelta(days=1)
    return rows


def _reports(seller: SellerState) -> dict[str, _Report]:
    reports: dict[str, _Report] = seller.plugins.setdefault(_KEY, {})
    return reports


def _status(report: _Report, call: Call) -> str | None:
    """The report's status now; None once it is gone."""
    life = call.config.report_tasks
    age = (time.monotonic() - report.created) / call.config.time_scale
    if age < life.new_s:
        return "WAITING"
    if age < life.build_s:
        return "PROCESSING"
    return "SUCCESS" if age < life.build_s + KEPT_S else None


def _uuid(text: Any, name: str) -> str:
    try:
        return str(uuid.UUID(str(text)))
    except ValueError:
        raise BadRequest(f"{name}: {text!r} is not a UUID", "Bad Request") from None


def _day(params: dict[str, Any], name: str) -> date:
    try:
        return date.fromisoformat(str(params[name]))
    except (KeyError, ValueError):
        raise BadRequest(f"params.{name}: a date (YYYY-MM-DD) is required", "Bad Request") from None


def _nm_ids(params: dict[str, Any]) -> set[int]:
    nm_ids = params.get("nmIDs") or []
    if not isinstance(nm_ids, list) or len(nm_ids) > 1000:
        raise BadRequest("params.nmIDs: at most 1000 WB item numbers", "Bad Request")
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in nm_ids):
        raise BadRequest("params.nmIDs: WB item numbers are integers", "Bad Request")
    return set(nm_ids)


async def create(call: Call) -> Response:
    """Start building a report under the seller's id for it."""
    body = await call.body()
    report_id = _uuid(body.get("id"), "id")
    if body.get("reportType") != REPORT_TYPE:
        detail = (
            f"reportType: the emulator builds {REPORT_TYPE} only, got {body.get('reportType')!r}"
        )
        raise BadRequest(detail, "Bad Request")
    params = body.get("params")
    if not isinstance(params, dict):
        raise BadRequest("params: an object is required", "Bad Request")
    start, end = _day(params, "startDate"), _day(params, "endDate")
    if end < start:
        raise BadRequest("params.endDate is before params.startDate", "Bad Request")
    if (end - start).days >= MAX_DAYS:
        raise BadRequest("the report's period is longer than a year", "Bad Request")
    if params.get("aggregationLevel", "day") != "day":
        raise BadRequest("params.aggregationLevel: the emulator builds day only", "Bad Request")
    wanted = _nm_ids(params)
    reports = _reports(call.seller)
    for gone in [i for i, report in reports.items() if _status(report, call) is None]:
        del reports[gone]  # gone at WB too: a long-running emulator holds only what WB keeps
    if report_id in reports:
        raise BadRequest(f"a report with id {report_id} exists: use a new id", "Bad Request")
    rows = [
        row for row in history_rows(call.data, start, end) if not wanted or row["nmID"] in wanted
    ]
    name = body.get("userReportName") or "Воронка продаж по артикулам"
    now = datetime.now(MOSCOW).strftime("%Y-%m-%d %H:%M:%S")
    reports[report_id] = _Report(report_id, str(name), start, end, time.monotonic(), now, rows)
    return json_reply({"data": STARTED})


def _archive(report: _Report) -> bytes:
    """The report's ZIP archive: one CSV file, made once."""
    if report.archive is None:
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        writer.writerow(COLUMNS)
        writer.writerows([row[c] for c in COLUMNS] for row in report.rows)
        packed = io.BytesIO()
        with zipfile.ZipFile(packed, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr(f"{report.id}.csv", text.getvalue().encode("utf-8"))
        report.archive = packed.getvalue()
    return report.archive


async def list_reports(call: Call) -> Response:
    """The seller's reports (those of ``filter[downloadIds]`` when given) with their status."""
    ids = {
        _uuid(i, "filter[downloadIds]")
        for i in call.request.query_params.getlist("filter[downloadIds]")
    }
    listed = []
    for report in _reports(call.seller).values():
        status = _status(report, call)
        if status is None or (ids and report.id not in ids):
            continue
        listed.append(
            {
                "id": report.id,
                "status": status,
                "name": report.name,
                "size": len(_archive(report)) if status == "SUCCESS" else 0,
                "startDate": report.start.isoformat(),
                "endDate": report.end.isoformat(),
                "createdAt": report.created_at,
            }
        )
    return json_reply({"data": listed})


async def download(call: Call) -> Response:
    """The built report's ZIP archive."""
    report_id = _uuid(call.request.path_params.get("downloadId"), "downloadId")
    report = _reports(call.seller).get(report_id)
    status = None if report is None else _status(report, call)
    if report is None or status is None:
        raise BadRequest("report not found", "Bad Request")
    if status != "SUCCESS":
        raise BadRequest(f"report is not ready: it is {status}", "Bad Request")
    disposition = f'attachment; filename="{report_id}.zip"'
    return Response(
        _archive(report), media_type="application/zip", headers={"Content-Disposition": disposition}
    )


def expected(data: SellerData, seller: SellerState, params: dict[str, Any]) -> list[Row]:
    """What the days ``date_from`` to ``date_to`` (query parameters; default: the last year)
    of the report hold, oldest first."""
    last = date.fromisoformat(str(params.get("date_to", data.last_day))[:10])
    first = date.fromisoformat(str(params.get("date_from", "2000-01-01"))[:10])
    return history_rows(data, max(first, data.last_day - timedelta(days=MAX_DAYS - 1)), last)


EMULATED = (
    EmulatedMethod(CREATE, create, expected=expected),
    EmulatedMethod(LIST, list_reports),
    EmulatedMethod(FILE, download),
)
