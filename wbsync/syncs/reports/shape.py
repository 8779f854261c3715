"""What a :class:`~wbsync.syncs.reports.task.ReportTask` is shaped by: its windows, and the
defaults of the parts a report of another family replaces (the create's parameters, where the
status is, what the status words mean, the download's rows).

The defaults are the reports section's family (paid storage, warehouse remains, paid
acceptance): ``GET`` create with ``dateFrom``/``dateTo`` answering ``{"data": {"taskId"}}``,
``GET .../tasks/{task_id}/status`` answering ``{"data": {"status"}}`` with ``new``,
``processing``, ``done``, ``purged``, ``canceled``, and the download a JSON array. Seller
analytics' ``nm-report`` downloads are another family (a ``POST`` create whose JSON body holds
the seller's own id, the status read from a list, a ZIP of CSV); the example plugin
``examples/wbsync-nmreport`` declares one with the same types.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

from wbsync.wb.endpoints import Endpoint
from wbsync.wb.paging import Row, bad_reply, rows_at
from wbsync.wb.replies import WbReply

__all__ = [
    "TASK_STATES",
    "TaskStates",
    "Window",
    "date_params",
    "download_rows",
    "task_id_of",
    "task_status",
]


@dataclass(frozen=True, slots=True)
class Window:
    """The days one task of a dated report covers, both included."""

    first: date
    last: date


@dataclass(frozen=True, slots=True)
class TaskStates:
    """WB's words for a task's status: ``building`` while WB builds it, ``done`` once built;
    any other word is a task WB lost (it is created again)."""

    building: frozenset[str]
    done: frozenset[str]

    def __post_init__(self) -> None:
        if not self.done or self.building & self.done:
            raise ValueError("a task's done words must be some, and none of its building words")


#: The reports section's words: ``new`` and ``processing`` while building, ``done`` once built
#: (``purged`` and ``canceled``: lost).
TASK_STATES = TaskStates(building=frozenset({"new", "processing"}), done=frozenset({"done"}))


def date_params(window: Window | None) -> dict[str, Any]:
    """A dated report's create parameters: ``dateFrom`` and ``dateTo`` (``YYYY-MM-DD``)."""
    if window is None:
        return {}
    return {"dateFrom": window.first.isoformat(), "dateTo": window.last.isoformat()}


def download_rows(reply: WbReply, ep: Endpoint) -> list[Row]:
    """The report's rows: the body's JSON array as WB sent it (a 204 is an empty report), or a
    ZIP-of-CSV download's rows (``Endpoint.reply``), typed later as the dataset declares."""
    return rows_at(reply, ep)


def task_id_of(reply: WbReply, ep: Endpoint) -> str:
    """The id WB gave the task it created: ``data.taskId`` of the create's reply."""
    data = reply.data.get("data") if isinstance(reply.data, dict) else None
    task_id = data.get("taskId") if isinstance(data, dict) else None
    if not isinstance(task_id, str) or not task_id:
        raise bad_reply(reply, ep, "expected the task id at data.taskId")
    return task_id


def task_status(reply: WbReply, ep: Endpoint, task_id: str) -> str | None:
    """WB's word for the task in a status reply: ``data.status`` (the reply is about the task
    its path names). A status reader answers None for a reply that does not hold the task
    (unknown to WB); this one never does, WB's 404 says that."""
    data = reply.data.get("data") if isinstance(reply.data, dict) else None
    state = data.get("status") if isinstance(data, dict) else None
    if not isinstance(state, str):
        raise bad_reply(reply, ep, "expected the task's status at data.status")
    return state
