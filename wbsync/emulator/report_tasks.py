"""WB's reports served as tasks, emulated: paid storage, warehouse remains, paid acceptance.

Written from WB's documents (Reports: "Paid Storage", "Warehouses Remains", "Paid Acceptance"),
not from the client: each report is three methods on ``seller-analytics-api`` (category
Analytics), each with WB's own limits: create (``GET /api/v1/<report>``, answers ``{"data":
{"taskId": <uuid>}}``), status (``.../tasks/{task_id}/status``, answers ``{"data": {"id",
"status"}}``) and download (``.../tasks/{task_id}/download``, the rows as a JSON array). Paid
storage takes at most 8 days a task, paid acceptance 31 (a 400 in WB's words past that).

A task's life, on the emulator's clock at its time scale, with WB's figures by default
(``EmulatorConfig.report_tasks``): ``new`` for 2 s, ``processing`` until 20 s after its creation
(``BUILD_S``), then ``done``; WB keeps a built report for 2 hours, then it is ``purged``. An id
WB never gave (or another seller's) is a 404 ``{"title": "Not Found", "detail": "not found"}``.
A task's rows are taken when it is created (the report WB builds is of that moment); a purged
task's rows are let go, and a task purged for as long as WB kept it is forgotten (its id then
answers 404, as one WB never gave): a long-running emulator holds only the reports WB would.
``plan_tasks`` lets a test give a seller's next tasks another fate: ``canceled`` (WB declines
it), ``stuck`` (processing for ever), ``lost`` (WB forgets the id: 404) or ``purged`` (purged as
soon as it is built).

Declared as built-in emulated methods with the types a plugin declares its own with
(``wbsync.emulator.extend``), each with its expected rows: ``EMULATED``, which the analytics
section's module (``wbsync.emulator.methods.analytics``) registers with its own.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from starlette.responses import Response

from wbsync.emulator.config import EmulatorConfig, ReportTaskLife
from wbsync.emulator.dataset import WAREHOUSES, Row, SellerData
from wbsync.emulator.emulated import Call, EmulatedMethod
from wbsync.emulator.method import Method, Rate
from wbsync.emulator.replies import BadRequest, json_reply, problem
from wbsync.emulator.state import SellerState
from wbsync.emulator.tokens import Kind
from wbsync.system import clock

__all__ = ["BUILD_S", "EMULATED", "FATES", "plan_tasks"]

BUILD_S = ReportTaskLife().build_s
"""WB-seconds from a task's creation to its report being built by default (WB: seconds to
minutes)."""
FATES = ("done", "canceled", "stuck", "lost", "purged")
_KEY = "report_tasks"  # the seller state's plugins key
_HOST, _CATEGORY, _X_CATEGORY = "seller-analytics-api", "analytics", "contentanalytics"
_MIN, _H = 60.0, 3600.0
_ORIGIN = "api-statistics"
# WB's own entries of an item's warehouses list: on the way to customers, returns on the way
# back to WB's warehouses, the total in its warehouses.
_TO_CUSTOMERS = "В пути до получателей"  # noqa: RUF001
_RETURNING = "В пути возвраты на склад WB"  # noqa: RUF001
_TOTAL = "Всего находится на складах"  # noqa: RUF001


@dataclass
class _Task:
    report: str
    created: float
    rows: list[Row]
    fate: str


@dataclass
class _Tasks:
    """A seller's tasks by id, and the fates its next tasks get (``plan_tasks``)."""

    by_id: dict[str, _Task] = field(default_factory=dict)
    fates: list[str] = field(default_factory=list)


def _tasks(seller: SellerState) -> _Tasks:
    tasks: _Tasks = seller.plugins.setdefault(_KEY, _Tasks())
    return tasks


def plan_tasks(seller: SellerState, *fates: str) -> None:
    """Give the seller's next tasks these fates, in order (then ``done`` again)."""
    unknown = [f for f in fates if f not in FATES]
    if unknown:
        raise ValueError(f"unknown fate(s) {unknown}; known: {', '.join(FATES)}")
    _tasks(seller).fates.extend(fates)


def _status(task: _Task, config: EmulatorConfig) -> str:
    life = config.report_tasks
    age = (clock.monotonic() - task.created) / config.time_scale
    if task.fate == "stuck":
        return "new" if age < life.new_s else "processing"
    if age < life.new_s:
        return "new"
    if task.fate == "canceled":
        return "canceled"
    if age < life.build_s:
        return "processing"
    if task.fate == "purged" or age >= life.build_s + life.kept_s:
        task.rows = []  # WB no longer has the report
        return "purged"
    return "done"


def _forget_old(tasks: _Tasks, config: EmulatorConfig) -> None:
    """Forget the tasks purged for as long as WB kept them (a stuck one too, as long after)."""
    life = config.report_tasks
    oldest = clock.monotonic() - (life.build_s + 2 * life.kept_s) * config.time_scale
    for task_id in [i for i, task in tasks.by_id.items() if task.created < oldest]:
        del tasks.by_id[task_id]


def _not_found() -> Response:
    return problem(404, "Not Found", "not found", uuid.uuid4().hex, origin=_ORIGIN)


def _found(call: Call, report: str) -> tuple[str, _Task] | None:
    task_id = call.request.path_params.get("task_id", "")
    try:
        uuid.UUID(task_id)
    except ValueError:
        detail = f"Invalid format for parameter task_id: {task_id!r} is not a UUID"
        raise BadRequest(detail, "Bad Request") from None
    task = _tasks(call.seller).by_id.get(task_id)
    if task is None or task.report != report or task.fate == "lost":
        return None
    return task_id, task


def _day(call: Call, name: str) -> date:
    text = call.query(name)
    if not text:
        raise BadRequest(f"{name}: field required", "Bad Request")
    try:
        return date.fromisoformat(text[:10])
    except ValueError:
        raise BadRequest(f"incorrect {name}", "Bad Request") from None


def _window(call: Call, most_days: int) -> tuple[date, date]:
    first, last = _day(call, "dateFrom"), _day(call, "dateTo")
    if last < first:
        raise BadRequest("dateTo should be greater dateFrom", "Bad Request")
    if (last - first).days > most_days:
        detail = f"Difference between dateFrom and dateTo should be less or equal {most_days} days"
        raise BadRequest(detail, "Bad Request")
    return first, last


def _days(data: SellerData, first: date, last: date) -> list[date]:
    last = min(last, data.last_day)
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


# -- the reports' rows -------------------------------------------------------------------------


def paid_storage_rows(data: SellerData, first: date, last: date) -> list[Row]:
    """Each day's storage cost of every size in stock that day (up to the emulator's today)."""
    rows = []
    for day in _days(data, first, last):
        r = data.rng(f"paid_storage:{day.isoformat()}")
        for p in data.products:
            for s in p.sizes:
                if r.random() < 0.2:
                    continue  # not in stock that day
                count = r.randrange(1, 40)
                coef = r.choice([1.0, 1.3, 1.7])
                volume = round(r.uniform(0.5, 12.0), 2)
                rows.append(
                    {
                        "date": day.isoformat(),
                        "logWarehouseCoef": 0,
                        "officeId": 0,  # WB's release 570: only 0 for now
                        "warehouse": "Склад WB РФ",  # and only this name
                        "warehouseCoef": coef,
                        "giId": 7_000_000 + p.index,
                        "chrtId": s.chrt_id,
                        "size": s.tech_size,
                        "barcode": s.barcode,
                        "subject": p.subject_name,
                        "brand": p.brand,
                        "vendorCode": p.vendor_code,
                        "nmId": p.nm_id,
                        "volume": volume,
                        "calcType": "короба: без габаритов",
                        "warehousePrice": round(count * volume * 0.08 * coef, 2),
                        "barcodesCount": count,
                        "palletPlaceCode": 0,
                        "palletCount": 0,
                        "originalDate": day.isoformat(),
                        "loyaltyDiscount": 0,
                        "tariffFixDate": "",
                        "tariffLowerDate": "",
                    }
                )
    return rows


def acceptance_rows(data: SellerData, first: date, last: date) -> list[Row]:
    """The supplies WB accepted each day (some days none), per item."""
    rows: list[Row] = []
    for day in _days(data, first, last):
        r = data.rng(f"acceptance:{day.isoformat()}")
        if r.random() < 0.6 or not data.products:
            continue
        income = 20_000_000 + day.toordinal()
        for _ in range(r.randrange(1, 4)):
            p = data.products[r.randrange(len(data.products))]
            count = r.randrange(1, 50)
            rows.append(
                {
                    "count": count,
                    "giCreateDate": (day - timedelta(days=1)).isoformat(),
                    "incomeId": income,
                    "nmID": p.nm_id,
                    "shkCreateDate": day.isoformat(),
                    "subjectName": p.subject_name,
                    "total": round(count * 1.75, 2),
                }
            )
    # One item counted once a supply and day: WB sums them.
    merged: dict[tuple[Any, ...], Row] = {}
    for row in rows:
        key = (row["incomeId"], row["nmID"], row["shkCreateDate"])
        if key in merged:
            merged[key]["count"] += row["count"]
            merged[key]["total"] = round(merged[key]["total"] + row["total"], 2)
        else:
            merged[key] = row
    return list(merged.values())


def remains_rows(data: SellerData) -> list[Row]:
    """Every barcode's stock by warehouse (WB's finest grouping), with WB's own entries for
    goods on their way and the total."""
    r = data.rng("warehouse_remains")
    rows = []
    for p in data.products:
        for s in p.sizes:
            stocked = [w for _, w in WAREHOUSES if r.random() < 0.4]
            quantities = [r.randrange(1, 200) for _ in stocked]
            warehouses: list[Row] = [
                {"warehouseName": w, "quantity": q}
                for w, q in zip(stocked, quantities, strict=True)
            ]
            total = sum(quantities)
            warehouses += [
                {"warehouseName": _TO_CUSTOMERS, "quantity": r.randrange(0, 10)},
                {"warehouseName": _RETURNING, "quantity": r.randrange(0, 3)},
                {"warehouseName": _TOTAL, "quantity": total},
            ]
            rows.append(
                {
                    "brand": p.brand,
                    "subjectName": p.subject_name,
                    "vendorCode": p.vendor_code,
                    "nmId": p.nm_id,
                    "barcode": s.barcode,
                    "techSize": s.tech_size,
                    "volume": round(r.uniform(0.5, 12.0), 2),
                    "warehouses": warehouses,
                }
            )
    return rows


# -- the methods -------------------------------------------------------------------------------

RowsOf = Callable[[Call], list[Row]]


def _rates(
    period_s: float, limit: int, burst: int, base: tuple[float, int, int]
) -> dict[Kind, Rate]:
    full = Rate(period_s, limit, burst)
    return {Kind.PERSONAL: full, Kind.SERVICE: full, Kind.TEST: full, Kind.BASE: Rate(*base)}


def _method(name: str, path: str, rates: dict[Kind, Rate]) -> Method:
    return Method(
        name=name,
        verb="GET",
        path=path,
        host=_HOST,
        category=_CATEGORY,
        rates=rates,
        group=name,
        x_category=_X_CATEGORY,
    )


def _report(
    report: str,
    path: str,
    rows_of: RowsOf,
    expected: Callable[[SellerData, SellerState, dict[str, Any]], list[Row]],
    rates: tuple[dict[Kind, Rate], dict[Kind, Rate], dict[Kind, Rate]],
) -> list[EmulatedMethod]:
    """The create, status and download methods of one report."""
    name = f"analytics.{report}"

    async def create(call: Call) -> Response:
        rows = rows_of(call)
        tasks = _tasks(call.seller)
        _forget_old(tasks, call.config)
        fate = tasks.fates.pop(0) if tasks.fates else "done"
        task_id = str(uuid.uuid4())
        tasks.by_id[task_id] = _Task(report, clock.monotonic(), rows, fate)
        return json_reply({"data": {"taskId": task_id}})

    async def status(call: Call) -> Response:
        found = _found(call, report)
        if found is None:
            return _not_found()
        task_id, task = found
        state = _status(task, call.config)
        return json_reply({"data": {"id": task_id, "status": state}})

    async def download(call: Call) -> Response:
        found = _found(call, report)
        if found is None:
            return _not_found()
        _, task = found
        state = _status(task, call.config)
        if state == "purged":
            return _not_found()
        if state != "done":
            raise BadRequest(f"report is not ready: the task is {state}", "Bad Request")
        return json_reply(task.rows) if task.rows else Response(status_code=204)

    tasks = f"{path}/tasks/{{task_id}}"
    return [
        EmulatedMethod(_method(name, path, rates[0]), create, expected=expected),
        EmulatedMethod(_method(f"{name}_status", f"{tasks}/status", rates[1]), status),
        EmulatedMethod(_method(f"{name}_download", f"{tasks}/download", rates[2]), download),
    ]


def _dated(params: dict[str, Any]) -> tuple[date, date]:
    first = date.fromisoformat(str(params.get("date_from", "2000-01-01"))[:10])
    last = date.fromisoformat(str(params.get("date_to", "9999-12-31"))[:10])
    return first, last


def _paid_storage_expected(data: SellerData, _: SellerState, params: dict[str, Any]) -> list[Row]:
    """What the days ``date_from`` to ``date_to`` (query parameters) of paid storage hold."""
    first, last = _dated(params)
    return paid_storage_rows(data, max(first, data.last_day - timedelta(days=400)), last)


def _acceptance_expected(data: SellerData, _: SellerState, params: dict[str, Any]) -> list[Row]:
    """What the days ``date_from`` to ``date_to`` (query parameters) of paid acceptance hold."""
    first, last = _dated(params)
    return acceptance_rows(data, max(first, data.last_day - timedelta(days=400)), last)


def _remains_expected(data: SellerData, _: SellerState, __: dict[str, Any]) -> list[Row]:
    """The warehouse remains report's items, as WB sends them."""
    return remains_rows(data)


METHODS = [
    *_report(
        "paid_storage",
        "/api/v1/paid_storage",
        lambda call: paid_storage_rows(call.data, *_window(call, 8)),
        _paid_storage_expected,
        (
            _rates(_MIN, 1, 5, (_H, 1, 1)),
            _rates(5.0, 1, 5, (_H, 2, 2)),
            _rates(_MIN, 1, 1, (_H, 2, 1)),
        ),
    ),
    *_report(
        "warehouse_remains",
        "/api/v1/warehouse_remains",
        lambda call: remains_rows(call.data),
        _remains_expected,
        (
            _rates(_MIN, 1, 5, (_H, 4, 1)),
            _rates(5.0, 1, 5, (_H, 4, 1)),
            _rates(_MIN, 1, 1, (_H, 4, 1)),
        ),
    ),
    *_report(
        "acceptance_report",
        "/api/v1/acceptance_report",
        lambda call: acceptance_rows(call.data, *_window(call, 31)),
        _acceptance_expected,
        (
            _rates(_MIN, 1, 1, (3 * _H, 1, 1)),
            _rates(5.0, 1, 1, (_H, 2, 1)),
            _rates(_MIN, 1, 1, (_H, 2, 1)),
        ),
    ),
]

EMULATED = tuple(METHODS)
