"""WB's reports served as tasks (create, poll the status, download once), and the built-in
syncs of three of them, each declared in its own module as a plugin declares a sync
(:class:`~wbsync.syncs.reports.task.ReportTask`, exported by ``wbsync.extend``)."""

from wbsync.syncs.reports.task import ReportCursor, ReportTask, Window, date_params, download_rows

__all__ = ["ReportCursor", "ReportTask", "Window", "date_params", "download_rows"]
