"""A CSV report's cells typed as its dataset declares (``wbsync.syncs.reports.cells``), and a
report task's declaration of the other family's shape (the id in the status query)."""

from __future__ import annotations

import dataclasses
import re

import pytest

from wbsync.store.datasets import Dataset, KeyField
from wbsync.syncs import SYNCS
from wbsync.syncs.reports import TaskStates
from wbsync.syncs.reports.cells import typed_rows
from wbsync.syncs.reports.task import ReportTask

DAYS = Dataset(
    name="test_csv_days",
    source="GET /csv",
    key=(KeyField("nm_id", "nmID"), KeyField("date", "dt", "date")),
    data_schema={
        "type": "object",
        "properties": {
            "count": {"type": "integer"},
            "share": {"type": "number"},
            "promoted": {"type": "boolean"},
            "rating": {"type": ["number", "string"]},  # WB's "no rating" among the numbers
            "sum": {"type": ["integer", "null"]},
            "name": {"type": "string"},
        },
    },
)


def test_cells_take_the_types_the_dataset_declares_and_the_rest_stay_text() -> None:
    row = {
        "nmID": "42",  # a key field of kind int: an integer
        "dt": "2026-12-01",
        "count": "7",
        "share": "12.5",
        "promoted": "TRUE",
        "rating": "no rating",
        "sum": "",
        "name": "007",
        "extra": "3",  # not declared: text
    }
    [typed] = typed_rows([row], DAYS)
    assert typed == {
        "nmID": 42,
        "dt": "2026-12-01",
        "count": 7,
        "share": 12.5,
        "promoted": True,
        "rating": "no rating",
        "sum": None,
        "name": "007",
        "extra": "3",
    }
    # A number written as an integer stays one, as JSON would carry it; a missing column stays
    # missing.
    assert typed_rows([{"share": "-3", "count": " 5 "}], DAYS) == [{"share": -3, "count": 5}]
    assert typed_rows([{"share": "1e3"}], DAYS) == [{"share": 1000.0}]


@pytest.mark.parametrize(
    ("column", "cell", "kind"),
    [
        ("count", "7.5", "integer"),
        ("count", "1_000", "integer"),
        ("share", "12,5", "number"),
        ("share", "nan", "number"),
        ("promoted", "yes", "boolean"),
        ("nmID", "x", "integer"),
    ],
)
def test_a_cell_not_of_its_declared_type_is_refused_naming_it(
    column: str, cell: str, kind: str
) -> None:
    said = f"row 2: {column} is {cell!r}, not the {kind} dataset test_csv_days declares"
    with pytest.raises(ValueError, match=re.escape(said)):
        typed_rows([{}, {column: cell}], DAYS)


def test_a_report_whose_status_is_a_list_declares_the_id_in_its_query() -> None:
    storage = SYNCS["paid-storage-sync"]
    [create, status, download] = storage.calls
    [rows] = storage.stores
    listing = dataclasses.replace(status, path="/api/v1/paid_storage/tasks")
    with pytest.raises(ValueError, match="path must hold"):
        ReportTask("q", "r", create, listing, download, rows, 60.0, window_days=8)
    task = ReportTask(
        "q",
        "r",
        create,
        listing,
        download,
        rows,
        60.0,
        window_days=8,
        status_params=lambda task_id: {"ids": [task_id]},
    )
    assert task.sync().methods == (create.name, listing.name, download.name)
    # The download always names the task in its path.
    with pytest.raises(ValueError, match="path must hold"):
        dataclasses.replace(task, download=listing)
    with pytest.raises(ValueError, match="done words"):
        TaskStates(building=frozenset({"WAITING"}), done=frozenset())
