"""warehouse-remains-sync: WB's warehouse remains report, the stock of each item by warehouse.

Declared from WB's documents (Reports, "Warehouses Remains", ``seller-analytics-api``, category
Analytics): ``GET /api/v1/warehouse_remains`` creates a task (1 a minute, burst 5; Base tokens
4 an hour, burst 1), ``.../tasks/{task_id}/status`` (1 per 5 s, burst 5; Base 4 an hour),
``.../tasks/{task_id}/download`` (1 a minute, burst 1; Base 4 an hour). The task is asked with
WB's finest grouping (brand, subject, seller's article, WB article, barcode and size), so each
item of the report is one barcode: its ``brand``, ``subjectName``, ``vendorCode``, ``nmId``,
``barcode``, ``techSize``, ``volume`` and ``warehouses``, a list of ``{warehouseName,
quantity}`` (WB lists there too what is on its way to and from customers and the total, by
names of its own).

Stored one row per item and warehouse (the item's fields, ``warehouseName`` and ``quantity``):
every run's report is the whole stock, so a row it no longer has (an item gone from a
warehouse) is tombstoned at the run's end.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from wbsync.store.datasets import Dataset, KeyField
from wbsync.syncs.reports.common import HOUR, MINUTE, endpoint
from wbsync.syncs.reports.shape import Window, download_rows
from wbsync.syncs.reports.task import ReportTask
from wbsync.wb.endpoints import Endpoint
from wbsync.wb.paging import bad_reply
from wbsync.wb.replies import WbReply

CREATE = endpoint(
    "analytics.warehouse_remains", "/api/v1/warehouse_remains", (MINUTE, 1, 5), (HOUR, 4, 1)
)
STATUS = endpoint(
    "analytics.warehouse_remains_status",
    "/api/v1/warehouse_remains/tasks/{task_id}/status",
    (5.0, 1, 5),
    (HOUR, 4, 1),
)
DOWNLOAD = endpoint(
    "analytics.warehouse_remains_download",
    "/api/v1/warehouse_remains/tasks/{task_id}/download",
    (MINUTE, 1, 1),
    (HOUR, 4, 1),
)

#: WB's grouping asked for: the finest, one item per barcode.
GROUPING = (
    "groupByBrand",
    "groupBySubject",
    "groupBySa",
    "groupByNm",
    "groupByBarcode",
    "groupBySize",
)

ROWS = Dataset(
    name="warehouse_remains",
    source="GET /api/v1/warehouse_remains (a report task; one row per item and warehouse of "
    "its warehouses list)",
    key=(
        KeyField("nm_id", "nmId"),
        KeyField("barcode", "barcode", "str", missing=""),
        KeyField("warehouse", "warehouseName", "str"),
    ),
    kind="snapshot",
    data_schema={
        "type": "object",
        "properties": {
            "nmId": {"type": "integer"},
            "barcode": {"type": "string"},
            "warehouseName": {"type": "string"},
            "quantity": {"type": "integer"},
            "brand": {"type": "string"},
            "subjectName": {"type": "string"},
            "vendorCode": {"type": "string"},
            "techSize": {"type": "string"},
            "volume": {"type": "number"},
        },
    },
)


def grouped(window: Window | None) -> dict[str, Any]:
    """The create parameters: WB's finest grouping (booleans as WB's query takes them)."""
    return dict.fromkeys(GROUPING, "true")


def warehouse_rows(item: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One item of the report as stored rows, one per entry of its ``warehouses`` list: the
    item's fields, ``warehouseName`` and ``quantity``. ``ValueError`` when ``warehouses`` is no
    list of objects."""
    warehouses = item.get("warehouses")
    if not isinstance(warehouses, list) or not all(isinstance(w, dict) for w in warehouses):
        raise ValueError("expected a list of objects at warehouses of every item")
    fields = {k: v for k, v in item.items() if k != "warehouses"}
    return [
        {**fields, "warehouseName": w.get("warehouseName"), "quantity": w.get("quantity")}
        for w in warehouses
    ]


def by_warehouse(reply: WbReply, ep: Endpoint) -> list[Mapping[str, Any]]:
    """The report's rows: each item's :func:`warehouse_rows`."""
    out: list[Mapping[str, Any]] = []
    for item in download_rows(reply, ep):
        try:
            out += warehouse_rows(item)
        except ValueError as exc:
            raise bad_reply(reply, ep, str(exc)) from None
    return out


REPORT = ReportTask(
    name="warehouse-remains-sync",
    report="warehouse remains",
    create=CREATE,
    status=STATUS,
    download=DOWNLOAD,
    dataset=ROWS,
    interval_s=3600.0,
    params=grouped,
    rows=by_warehouse,
)

SYNC = REPORT.sync()
