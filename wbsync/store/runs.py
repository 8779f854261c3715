"""Sync runs: the last success and the last failure of each (cabinet, sync), kept past the jobs."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ARRAY, Integer, Text, and_, bindparam, case, func, or_, select, text

from wbsync.errors import StoreError, WbMethodDisabledError
from wbsync.store.db import Database
from wbsync.store.schema import UtcDateTime, cabinets, sync_runs, utcnow
from wbsync.system.supervise import reap

__all__ = [
    "REASON_MAX_CHARS",
    "RUN_LOG_FLUSH_S",
    "CabinetOverview",
    "RunLog",
    "RunRecord",
    "RunRepository",
    "RunSuccess",
    "failure_reason",
]

log = logging.getLogger(__name__)

REASON_MAX_CHARS = 1000
"""A failure reason is cut to this many characters (an exception message can be a whole body)."""
RUN_LOG_FLUSH_S = 1.0
"""A success is written at most this long (real seconds) after its run ended (``RunLog``)."""


def failure_reason(exc: BaseException) -> str:
    """How a failure is kept: the error's type, then its message (the overview reads the type)."""
    return f"{type(exc).__name__}: {exc}"


# A run whose last outcome is this failure met a method WB has switched off.
_DISABLED_METHOD = and_(
    sync_runs.c.failure_reason.like(f"{WbMethodDisabledError.__name__}: %"),
    or_(sync_runs.c.success_at.is_(None), sync_runs.c.failure_at > sync_runs.c.success_at),
)


@dataclass(frozen=True, slots=True)
class RunRecord:
    """What the last runs of one (cabinet, sync) did."""

    cabinet_id: int
    sync: str
    success_at: datetime | None
    success_pages: int | None
    success_rows: int | None
    failure_at: datetime | None
    failure_reason: str | None
    failure_attempts: int | None


@dataclass(frozen=True, slots=True)
class RunSuccess:
    """One run's success: when it ended, and what its job stored."""

    cabinet_id: int
    sync: str
    at: datetime
    pages: int
    rows: int


@dataclass(frozen=True, slots=True)
class CabinetOverview:
    """A cabinet without its token, with the oldest of its syncs' last successes.

    ``oldest_success`` is the earliest ``success_at`` over its syncs, and ``successes`` how
    many of its syncs ever succeeded (a sync that never did counts from ``created_at``).
    ``disabled_methods``: how many of its syncs last met a method WB has switched off (their
    last failure, later than their last success, was ``WbMethodDisabledError``).
    """

    id: int
    name: str
    seller_id: str
    active: bool
    created_at: datetime
    oldest_success: datetime | None
    successes: int
    disabled_methods: int


_SUCCESS_COLUMNS = ("success_at", "success_pages", "success_rows")
_PG_SUCCESSES = text(
    """
WITH written AS (
  INSERT INTO sync_runs AS r (cabinet_id, sync, success_at, success_pages, success_rows)
  SELECT v.cabinet_id, v.sync, v.success_at, v.success_pages, v.success_rows
  FROM unnest(:cabinet_ids, :syncs, :ats, :pages, :rows)
    AS v(cabinet_id, sync, success_at, success_pages, success_rows)
  JOIN cabinets AS c ON c.id = v.cabinet_id AND c.removed_at IS NULL
  ON CONFLICT (cabinet_id, sync) DO UPDATE
    SET success_at = excluded.success_at, success_pages = excluded.success_pages,
        success_rows = excluded.success_rows
  RETURNING 1
)
SELECT count(*) AS written FROM written
"""
).bindparams(
    bindparam("cabinet_ids", type_=ARRAY(Integer())),
    bindparam("syncs", type_=ARRAY(Text())),
    bindparam("ats", type_=ARRAY(UtcDateTime())),
    bindparam("pages", type_=ARRAY(Integer())),
    bindparam("rows", type_=ARRAY(Integer())),
)
"""Successes as arrays, joined to their cabinets, upserted: one round trip (PostgreSQL)."""


class RunRepository:
    """Record runs and read them back, per cabinet or for every cabinet at once."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def succeeded(self, cabinet_id: int, sync: str, *, pages: int, rows: int) -> None:
        """A run of ``sync`` for the cabinet finished now, recorded at once (a worker's runs
        go through ``RunLog``, which writes them behind)."""
        await self.succeeded_many([RunSuccess(cabinet_id, sync, utcnow(), pages, rows)])

    async def succeeded_many(self, successes: Sequence[RunSuccess]) -> int:
        """Record many successes at once, leaving out those of cabinets deleted already; how
        many were written. On PostgreSQL one statement (the successes as arrays, joined to
        their cabinets), elsewhere one transaction of a read of their cabinets and an upsert
        of the rest. A cabinet deleted meanwhile fails it (``StoreError``); written again, the
        successes leave that one out."""
        if not successes:
            return 0
        if self._db.dialect == "postgresql":
            [row] = await self._db.fetch(
                _PG_SUCCESSES,
                {
                    "cabinet_ids": [s.cabinet_id for s in successes],
                    "syncs": [s.sync for s in successes],
                    "ats": [s.at for s in successes],
                    "pages": [s.pages for s in successes],
                    "rows": [s.rows for s in successes],
                },
            )
            return int(row["written"])
        ids = sorted({s.cabinet_id for s in successes})
        statement = self._db.upsert_statement(
            sync_runs, conflict=("cabinet_id", "sync"), update=_SUCCESS_COLUMNS
        )
        alive = select(cabinets.c.id).where(cabinets.c.id.in_(ids), cabinets.c.removed_at.is_(None))
        async with self._db.transaction() as conn:
            kept = set((await conn.scalars(alive)).all())
            values = [
                {
                    "cabinet_id": s.cabinet_id,
                    "sync": s.sync,
                    "success_at": s.at,
                    "success_pages": s.pages,
                    "success_rows": s.rows,
                }
                for s in successes
                if s.cabinet_id in kept
            ]
            if values:
                await conn.execute(statement, values)
        return len(values)

    async def failed(self, cabinet_id: int, sync: str, *, reason: str, attempts: int) -> None:
        """An attempt of ``sync`` for the cabinet failed: when, why, and attempts spent so far."""
        await self._upsert(
            {
                "cabinet_id": cabinet_id,
                "sync": sync,
                "failure_at": utcnow(),
                "failure_reason": reason[:REASON_MAX_CHARS],
                "failure_attempts": attempts,
            }
        )

    async def _upsert(self, values: dict[str, Any]) -> None:
        changed = tuple(k for k in values if k not in ("cabinet_id", "sync"))
        statement = self._db.upsert_statement(
            sync_runs, conflict=("cabinet_id", "sync"), update=changed
        )
        await self._db.fetch(statement, values)  # a run's record: through the driver

    async def of_cabinets(self, cabinet_ids: Sequence[int]) -> list[RunRecord]:
        """Every recorded (cabinet, sync) of these cabinets."""
        if not cabinet_ids:
            return []
        query = select(sync_runs).where(sync_runs.c.cabinet_id.in_(list(cabinet_ids)))
        async with self._db.connection() as conn:
            result = await conn.execute(query)
            return [RunRecord(*row) for row in result.all()]  # columns in field order

    async def queues(self) -> list[str]:
        """Every queue with a recorded run, whichever process ran it (a plugin's included)."""
        async with self._db.connection() as conn:
            return sorted((await conn.scalars(select(sync_runs.c.sync).distinct())).all())

    async def overview(self, *, fleet: Sequence[str] = ()) -> list[CabinetOverview]:
        """Every cabinet (by id) with its oldest last success: one query, no token read.

        ``fleet``: the fleet-wide syncs, left out (a cabinet that carried one of their runs
        keeps its record, but that run was the fleet's, not the cabinet's lag)."""
        runs = (
            select(
                sync_runs.c.cabinet_id,
                func.min(sync_runs.c.success_at).label("oldest_success"),
                func.count(sync_runs.c.success_at).label("successes"),
                func.count(case((_DISABLED_METHOD, 1))).label("disabled_methods"),
            )
            .where(sync_runs.c.sync.not_in(list(fleet)))
            .group_by(sync_runs.c.cabinet_id)
            .subquery()
        )
        query = (
            select(
                cabinets.c.id,
                cabinets.c.name,
                cabinets.c.seller_id,
                cabinets.c.active,
                cabinets.c.created_at,
                runs.c.oldest_success,
                func.coalesce(runs.c.successes, 0).label("successes"),
                func.coalesce(runs.c.disabled_methods, 0).label("disabled_methods"),
            )
            .select_from(cabinets.outerjoin(runs, runs.c.cabinet_id == cabinets.c.id))
            .where(cabinets.c.removed_at.is_(None))  # removed: not the status page's
            .order_by(cabinets.c.id)
        )
        async with self._db.connection() as conn:
            result = await conn.execute(query)
            return [CabinetOverview(*row) for row in result.all()]  # columns in field order


class RunLog:
    """Runs' successes, written behind: each (cabinet, sync)'s last success waits in memory
    and the ones of up to ``flush_s`` are written together (``succeeded_many``), in place of
    a statement (a round trip, a commit) at the end of every run.

    ``success_at`` is the run's end either way; the record shows up at most ``flush_s`` later.
    A flush that fails keeps its successes for the next one (a later success of the same pair
    replaces its earlier one, so what waits is bounded by the pairs, not by the runs); a
    process that dies loses what waits, at most ``flush_s`` of successes, which the pairs'
    next runs record again. An outage is warned of once, and its end told once. ``aclose``
    writes what waits, once. Failures are not written behind (``RunRepository.failed``): they
    are rare, and what an operator looks for first.
    """

    def __init__(self, runs: RunRepository, *, flush_s: float = RUN_LOG_FLUSH_S) -> None:
        if flush_s <= 0:
            raise ValueError(f"flush_s must be > 0, got {flush_s}")
        self._runs = runs
        self._flush_s = flush_s
        self._waiting: dict[tuple[int, str], RunSuccess] = {}
        self._flusher: asyncio.Task[None] | None = None
        self._closed = False
        self._failing = False  # the last flush was refused: warned of already

    @property
    def waiting(self) -> int:
        """Successes not written yet."""
        return len(self._waiting)

    def succeeded(self, cabinet_id: int, sync: str, *, pages: int, rows: int) -> None:
        """A run of ``sync`` for the cabinet finished now: recorded within ``flush_s``."""
        if self._closed:
            raise StoreError("the run log is closed: a success after the stop is not recorded")
        self._waiting[(cabinet_id, sync)] = RunSuccess(cabinet_id, sync, utcnow(), pages, rows)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_every(), name="run-log")

    async def _flush_every(self) -> None:
        while self._waiting:
            await asyncio.sleep(self._flush_s)
            try:
                written = await self.flush()
            except StoreError as exc:
                if not self._failing:  # once an outage, not once a flush
                    log.warning(
                        "run records not written (%d kept, tried again every %g s): %s",
                        self.waiting,
                        self._flush_s,
                        exc,
                    )
                self._failing = True
            else:
                if self._failing:
                    log.info("run records written again (%d)", written)
                self._failing = False

    async def flush(self) -> int:
        """Write what waits now; how many were written. ``StoreError`` when the database
        refused them: they wait for the next flush."""
        batch, self._waiting = self._waiting, {}
        try:
            return await self._runs.succeeded_many(list(batch.values()))
        except BaseException:  # a failure or a cancel: nothing lost, newer successes first
            for pair, success in batch.items():
                self._waiting.setdefault(pair, success)
            raise

    async def aclose(self) -> None:
        """Stop flushing and write what waits, once (a failure is logged: those are lost)."""
        if self._closed:
            return
        self._closed = True
        if self._flusher is not None:
            self._flusher.cancel()
            await reap(self._flusher)
        if not self._waiting:
            return
        try:
            await self.flush()
        except StoreError as exc:
            log.warning("%d run records lost at the stop: %s", self.waiting, exc)
