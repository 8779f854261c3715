"""WB's reports served as tasks (create, poll the status, download once), and the built-in
syncs of three of them, each declared in its own module as a plugin declares a sync
(:class:`~wbsync.syncs.reports.task.ReportTask`, exported by ``wbsync.extend``, with what shapes
it: ``shape.py``; a CSV download's cells typed: ``cells.py``)."""

from wbsync.syncs.reports.shape import (
    TASK_STATES,
    TaskStates,
    Window,
    date_params,
    download_rows,
    task_id_of,
    task_status,
)
from wbsync.syncs.reports.task import ReportCursor, ReportTask

__all__ = [
    "TASK_STATES",
    "ReportCursor",
    "ReportTask",
    "TaskStates",
    "Window",
    "date_params",
    "download_rows",
    "task_id_of",
    "task_status",
]
