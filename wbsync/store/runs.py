"""Sync runs: the last success and the last failure of each (cabinet, sync), kept past the jobs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, case, func, or_, select

from wbsync.errors import WbMethodDisabledError
from wbsync.store.db import Database
from wbsync.store.schema import cabinets, sync_runs, utcnow

__all__ = ["REASON_MAX_CHARS", "CabinetOverview", "RunRecord", "RunRepository", "failure_reason"]

REASON_MAX_CHARS = 1000
"""A failure reason is cut to this many characters (an exception message can be a whole body)."""


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


class RunRepository:
    """Record runs and read them back, per cabinet or for every cabinet at once."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def succeeded(self, cabinet_id: int, sync: str, *, pages: int, rows: int) -> None:
        """A run of ``sync`` for the cabinet finished: when, and what it stored."""
        await self._upsert(
            {
                "cabinet_id": cabinet_id,
                "sync": sync,
                "success_at": utcnow(),
                "success_pages": pages,
                "success_rows": rows,
            }
        )

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

    async def overview(self) -> list[CabinetOverview]:
        """Every cabinet (by id) with its oldest last success: one query, no token read."""
        runs = (
            select(
                sync_runs.c.cabinet_id,
                func.min(sync_runs.c.success_at).label("oldest_success"),
                func.count(sync_runs.c.success_at).label("successes"),
                func.count(case((_DISABLED_METHOD, 1))).label("disabled_methods"),
            )
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
            .order_by(cabinets.c.id)
        )
        async with self._db.connection() as conn:
            result = await conn.execute(query)
            return [CabinetOverview(*row) for row in result.all()]  # columns in field order
