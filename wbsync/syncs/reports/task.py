"""Report tasks: WB reports served as create, poll the status, download once.

WB serves some reports only as tasks (paid storage, warehouse remains, paid acceptance): the
seller creates a task (``GET /api/v1/paid_storage?dateFrom&dateTo`` answers ``{"data":
{"taskId": ...}}``), polls its status (``.../tasks/{task_id}/status``: ``new``, ``processing``,
``done``, ``purged``, ``canceled``) until WB has built it (seconds to minutes), and downloads it
(``.../tasks/{task_id}/download``: the rows, a JSON array). WB keeps a built report for 2 hours.
Seller analytics' reports (``nm-report`` downloads) are tasks of another shape: the seller makes
the id and sends it in the create's JSON body (``POST``), reads the status from a list of its
reports (``WAITING``, ``PROCESSING``, ``SUCCESS``, ``RETRY``, ``FAILED``), and downloads a ZIP
archive of a CSV file.

A :class:`ReportTask` declares a report of either family (its three methods, how its history is
cut into windows WB accepts, the dataset its rows go to; ``shape.py``, the parts that differ,
the first family's by default) and :meth:`ReportTask.sync` makes the
:class:`~wbsync.syncs.base.Sync` that runs it, so a plugin declares one like any sync. The run,
window by window, oldest first:

1. create the window's task and save its id in the cursor (a checkpoint page);
2. wait, with the slot given back, until the status is worth asking: one poll interval of the
   status method (WB's limit for the token's type; 5 s for a Personal token), or longer when
   the download's budget (1 a minute) opens later, since the report could not be downloaded
   sooner anyway: a window then costs one status call. The wait is not ours: it goes through
   ``wbsync.observability.context.wait_for_upstream``, so inside a job it is a deferral
   (``ReportPending``: the job gives its slot back and spends no attempt, labelled ``report``)
   and only outside one (a sync run in place) is it slept. Nothing here loops on a status
   inside a job;
3. ask the status; while WB is still building, wait again (2.); once ``done``, download the
   report. A deferral on the download's budget first notes in the cursor that WB built it, so
   the resumed run downloads without asking the status again;
4. store the rows as one page, through the dataset machinery (written only where they changed,
   in the change feed). A dated report's window is the whole truth for its days: the cabinet's
   rows of those days that the report no longer holds are tombstoned (``Store.tombstone_window``)
   before the rows are written. An undated report (warehouse remains) is a snapshot dataset:
   the run's end tombstones the rows it did not return;
5. move the cursor to the next window, in the same page.

A crash, a stop or a deferral resumes from the saved task id. A task WB lost (``purged``,
``canceled``, ``FAILED``, a 404 for its id or a list without it) is created again (with a new
id), at most ``report_recreate_max`` times for
one window; a task WB has not built ``report_deadline_s`` after its creation fails the attempt
(``WbReportError``, with that reason). Either failure first saves the cursor without the task,
so the next attempt creates the window's task again.

Dated reports are incremental: the cursor keeps the last day stored (``synced_to``), and a later
run asks again for ``report_recent_days`` before it up to today (WB recalculates recent days);
a first run starts ``report_horizon_days`` back.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date, timedelta
from typing import Any
from urllib.parse import quote

from wbsync.errors import RateLimitDeferred, ReportPending, WbReportError
from wbsync.observability.context import wait_for_upstream
from wbsync.store.datasets import Dataset
from wbsync.syncs.base import Count, Cursor, CursorShape, Flag, Sync, SyncInput, SyncPage, Text
from wbsync.syncs.base import optional as _optional
from wbsync.syncs.reports.cells import typed_rows
from wbsync.syncs.reports.shape import (
    TASK_STATES,
    TaskStates,
    Window,
    date_params,
    download_rows,
    task_id_of,
    task_status,
)
from wbsync.system import clock
from wbsync.wb.client import WbClient
from wbsync.wb.endpoints import Endpoint
from wbsync.wb.paging import bad_reply
from wbsync.wb.replies import WbReply

__all__ = ["ReportCursor", "ReportTask"]

log = logging.getLogger(__name__)

#: The state of a task WB does not know (a 404 for its id, or a status list without it).
UNKNOWN = "unknown to WB"


class ReportCursor(CursorShape):
    """Where a report task sync is: the last day stored and, during a run, the run's last day,
    the window in flight and its task (its id, when it was created, whether WB built it and
    how many times it was created again)."""

    synced_to: Text | None = _optional()
    end: Text | None = _optional()
    date_from: Text | None = _optional()
    date_to: Text | None = _optional()
    task_id: Text | None = _optional()
    created_ms: Count | None = _optional()
    built: Flag | None = _optional()
    recreated: Count | None = _optional()


@dataclass(frozen=True, slots=True)
class ReportTask:
    """A WB report served as a task: what a plugin declares to sync one.

    ``name`` is the queue, ``report`` the report's name in messages and on the status page.
    ``create``, ``status`` and ``download`` are the three WB methods; the download's path holds
    ``{task_id}``, and so does the status's unless ``status_params`` puts the id in its query.
    ``dataset`` is where the rows go.

    ``window_days``: a dated report's most days a task may cover (WB: 8 for paid storage, 31 for
    paid acceptance); its history is cut into windows of that many days, oldest first, and its
    ``dataset`` needs a key field of kind ``"date"`` (each window's days are replaced by its
    report). None: an undated report, one task a run, whose ``dataset`` is a ``"snapshot"``.
    ``params`` makes a window's create parameters (``dateFrom``/``dateTo`` by default, none
    when the create sends a body; an undated report's fixed ones); ``rows`` turns a download
    reply into the rows stored (the JSON array as WB sent it, or a ZIP-of-CSV download's rows,
    by default). A CSV download's cells are then typed as ``dataset`` declares (``cells.py``).
    ``interval_s`` and ``concurrency`` are the sync's.

    The task's id and status, WB's reports section's way by default (``shape.py``):
    ``create_body`` makes the create's JSON body from the window and an id wbsync made for the
    task (a UUID; WB's nm-report downloads take the seller's own), and then the create's reply
    is not read; without it WB makes the id (``task_id_of``: ``data.taskId``).
    ``status_params`` makes the status call's query from the id (a status read from a list of
    tasks); ``status_of`` reads WB's word for the task in the status reply, None when the reply
    does not hold it (unknown to WB: created again); ``states`` says which words are building
    and which are done (any other is a task WB lost).
    """

    name: str
    report: str
    create: Endpoint
    status: Endpoint
    download: Endpoint
    dataset: Dataset
    interval_s: float
    window_days: int | None = None
    params: Callable[[Window | None], dict[str, Any]] | None = None
    rows: Callable[[WbReply, Endpoint], Sequence[Mapping[str, Any]]] = download_rows
    concurrency: int | None = None
    create_body: Callable[[Window | None, str], Any] | None = None
    status_params: Callable[[str], dict[str, Any]] | None = None
    status_of: Callable[[WbReply, Endpoint, str], str | None] = task_status
    states: TaskStates = TASK_STATES

    def __post_init__(self) -> None:
        placed = (self.download,) if self.status_params else (self.status, self.download)
        for ep in placed:
            if "{task_id}" not in ep.path:
                raise ValueError(f"{self.name}: {ep.name}'s path must hold {{task_id}}")
        if self.window_days is not None:
            if self.window_days < 1:
                raise ValueError(f"{self.name}: window_days must be >= 1 or None")
            if self.dataset.date_column is None:
                raise ValueError(
                    f"{self.name}: a dated report's dataset {self.dataset.name} needs a key "
                    "field of kind 'date' (its windows' days are replaced)"
                )
        elif self.dataset.kind != "snapshot":
            raise ValueError(
                f"{self.name}: an undated report's dataset {self.dataset.name} must be a "
                "'snapshot' (each run's report is every row)"
            )

    def sync(self) -> Sync:
        """The sync that runs this report: long (it defers), incremental when dated."""
        return Sync(
            name=self.name,
            long=True,
            interval_s=self.interval_s,
            calls=(self.create, self.status, self.download),
            stores=(self.dataset,),
            pages=self.pages,
            cursor=ReportCursor,
            incremental=self.window_days is not None,
            concurrency=self.concurrency,
        )

    # -- one run -------------------------------------------------------------------------------

    async def pages(self, inp: SyncInput) -> AsyncIterator[SyncPage]:
        """The report's windows from ``inp.cursor``, each created, waited for, downloaded and
        stored as one page."""
        cursor: Cursor = dict(inp.cursor or {})
        if cursor.get("end") is None:
            cursor = self._first_window(cursor, inp)
            if cursor.get("end") is None:
                return  # an undated report already stored by this run
        while True:
            rows = None
            async for step in self._task(inp, cursor):
                if isinstance(step, SyncPage):
                    cursor = step.cursor
                    yield step
                else:
                    rows = step
            assert rows is not None
            window = self._window(cursor)
            after = self._after(cursor)
            if window is not None:
                keep = {self.dataset.row_key(row) for row in rows}
                await inp.store.tombstone_window(
                    self.dataset, inp.cabinet_id, window.first, window.last, keep
                )
            yield SyncPage(self.dataset.name, rows, after)
            cursor = after
            if cursor.get("end") is None:
                return

    def _first_window(self, cursor: Cursor, inp: SyncInput) -> Cursor:
        """A new run's cursor: its first window (from ``synced_to``, else the horizon)."""
        today = inp.today
        if self.window_days is None:
            if cursor.get("synced_to") is not None:
                return cursor  # resumed after this run stored the report: nothing left
            return {"end": today.isoformat()}
        options = inp.options
        start = today - timedelta(days=options.report_horizon_days - 1)
        synced = cursor.get("synced_to")
        if synced is not None:
            again = date.fromisoformat(synced) - timedelta(days=options.report_recent_days - 1)
            start = min(max(start, again), today)
        return {
            "synced_to": synced,
            "end": today.isoformat(),
            **self._window_fields(start, today),
        }

    def _window_fields(self, start: date, end: date) -> Cursor:
        assert self.window_days is not None
        last = min(start + timedelta(days=self.window_days - 1), end)
        return {"date_from": start.isoformat(), "date_to": last.isoformat()}

    def _window(self, cursor: Cursor) -> Window | None:
        if self.window_days is None:
            return None
        return Window(
            date.fromisoformat(cursor["date_from"]), date.fromisoformat(cursor["date_to"])
        )

    def _after(self, cursor: Cursor) -> Cursor:
        """The cursor once the window in flight is stored: the next window, or the run's end."""
        end = date.fromisoformat(cursor["end"])
        if self.window_days is None:
            return {"synced_to": end.isoformat()}
        last = date.fromisoformat(cursor["date_to"])
        if last >= end:
            return {"synced_to": last.isoformat()}
        fields = self._window_fields(last + timedelta(days=1), end)
        return {"synced_to": last.isoformat(), "end": end.isoformat(), **fields}

    # -- one task ------------------------------------------------------------------------------

    async def _task(
        self, inp: SyncInput, cursor: Cursor
    ) -> AsyncIterator[SyncPage | Sequence[Mapping[str, Any]]]:
        """The window's task, from the cursor's state: checkpoints as it moves on, then the
        downloaded rows (its last item)."""
        client = inp.client
        while True:
            task_id = cursor.get("task_id")
            if task_id is None:
                task_id = await self._create(client, self._window(cursor))
                cursor = {**cursor, "task_id": task_id, "created_ms": int(clock.now_ms())}
                cursor.pop("built", None)
                yield SyncPage.checkpoint(cursor)
                await self._wait(client, task_id)
            lost = None
            if not cursor.get("built"):
                state = await self._state(client, task_id)
                if state in self.states.building:
                    late = self._late(cursor, inp, state)
                    if late is not None:
                        yield SyncPage.checkpoint(self._afresh(cursor))
                        raise late
                    await self._wait(client, task_id)
                    continue
                if state not in self.states.done:
                    lost = state
            if lost is None:
                try:
                    reply = await client.call(self._at(self.download, task_id))
                except RateLimitDeferred:
                    # The download's budget is spent: the resumed run downloads without asking
                    # for the status again.
                    if not cursor.get("built"):
                        yield SyncPage.checkpoint({**cursor, "built": True})
                    raise
                if not reply.no_data:
                    yield self._rows(reply)
                    return
                lost = f"{UNKNOWN} at download"
            again = int(cursor.get("recreated") or 0) + 1
            bound = inp.options.report_recreate_max
            if again > bound:
                yield SyncPage.checkpoint(self._afresh(cursor))
                raise WbReportError(
                    f"WB lost report {self.report} again (task {task_id}: {lost}), {again} "
                    f"times for one window, past WBSYNC_REPORT_RECREATE_MAX ({bound}); the "
                    "next attempt asks WB for it again",
                    method=self.status.name,
                )
            log.warning(
                "%s: task %s is %s; creating it again (%d of at most %d)",
                self.name,
                task_id,
                lost,
                again,
                bound,
            )
            cursor = {**self._afresh(cursor), "recreated": again}

    async def _create(self, client: WbClient, window: Window | None) -> str:
        """Ask WB to build the window's report; the task's id (WB's, or ours when the create
        sends a body)."""
        if self.create_body is None:
            params = (self.params or date_params)(window)
            task_id = task_id_of(await client.call(self.create, params=params), self.create)
        else:
            task_id = str(uuid.uuid4())
            query = self.params(window) if self.params else None
            await client.call(self.create, params=query, json=self.create_body(window, task_id))
        log.info("%s: WB is building task %s", self.name, task_id)
        return task_id

    async def _state(self, client: WbClient, task_id: str) -> str:
        """WB's word for the task (``states``), or ``UNKNOWN`` (a 404 for its id, a status
        list without it)."""
        query = self.status_params(task_id) if self.status_params else None
        reply = await client.call(self._at(self.status, task_id), params=query)
        if reply.no_data:
            return UNKNOWN
        state = self.status_of(reply, self.status, task_id)
        return UNKNOWN if state is None else state

    def _rows(self, reply: WbReply) -> Sequence[Mapping[str, Any]]:
        """The download's rows as stored: ``rows``, a CSV's cells typed as the dataset says."""
        rows = self.rows(reply, self.download)
        if self.download.reply != "zip-csv":
            return rows
        try:
            return typed_rows(rows, self.dataset)
        except ValueError as exc:
            raise bad_reply(reply, self.download, str(exc)) from None

    async def _wait(self, client: WbClient, task_id: str) -> None:
        """Until the status is worth asking: one poll interval of the status method (WB's limit
        for the token's type), or longer when the download's budget opens later (the report
        could not be downloaded sooner anyway: one status call a window, not one a poll
        interval). A deferral inside a job."""
        scope = client.scope(self.status)
        poll_ms = scope.limit.interval_ms * client.options.time_scale
        wait_ms = max(poll_ms, await client.ready_in_ms(self.download))

        def pending() -> ReportPending:
            return ReportPending(round(wait_ms), scope, report=self.report, task_id=task_id)

        await wait_for_upstream(wait_ms, pending)

    def _late(self, cursor: Cursor, inp: SyncInput, state: str) -> WbReportError | None:
        """The failure of a task WB has not built within the deadline, else None."""
        deadline_ms = inp.options.report_deadline_s * 1000.0
        waited_ms = clock.now_ms() - float(cursor.get("created_ms") or 0)
        if waited_ms <= deadline_ms:
            return None
        return WbReportError(
            f"WB has not built report {self.report} (task {cursor['task_id']}, still "
            f"{state!r}) {waited_ms / 1000.0:.1f} s after it was created, past the "
            f"{deadline_ms / 1000.0:.1f} s deadline (WBSYNC_REPORT_DEADLINE_S, scaled); the "
            "next attempt asks WB for it again",
            method=self.status.name,
        )

    @staticmethod
    def _afresh(cursor: Cursor) -> Cursor:
        """The cursor of the window in flight without its task: the window's task is created
        again (a lost task's count of recreations is the caller's to set)."""
        dropped = ("task_id", "created_ms", "built", "recreated")
        return {k: v for k, v in cursor.items() if k not in dropped}

    @staticmethod
    def _at(ep: Endpoint, task_id: str) -> Endpoint:
        """``ep`` with the task's id in its path (escaped: WB's id is the path's one segment)."""
        return replace(ep, path=ep.path.replace("{task_id}", quote(task_id, safe="")))
