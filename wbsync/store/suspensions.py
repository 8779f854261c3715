"""Suspensions: what WB refused for good, per cabinet (its token) or per (cabinet, section).

A suspension is stored when WB first refuses what no retry fixes (a dead token, a missing
category, a token type, no balance; ``wbsync.wb.refusals`` decides) or when a stored token has
expired. The fan-out feeds nothing suspended; a new token, an operator (``lift``) or a probe that
WB accepts lifts it. ``section`` None is the whole cabinet; in the table it is "" (a key column
cannot be NULL on every backend).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, bindparam, delete, select, update

from wbsync.store.db import Database
from wbsync.store.schema import cabinet_suspensions, cabinets, utcnow

__all__ = ["KINDS", "Suspension", "SuspensionRepository"]

log = logging.getLogger(__name__)

KINDS = ("token", "expired", "category", "token_type", "payment", "refused")
"""The kinds of suspension: a dead token (401 "token problem"), an expired one (never sent), a
category the token lacks (401 scope), a token type WB refuses (403), no balance (402), and a
request this token may not make (a permanent 400)."""

_WHOLE = ""  # the section column's value for the whole cabinet


@dataclass(frozen=True, slots=True)
class Suspension:
    """One suspension in force."""

    cabinet_id: int
    cabinet: str
    """The cabinet's name."""
    section: str | None
    """The WB section suspended; None: the whole cabinet (its token)."""
    kind: str
    """One of ``KINDS``."""
    words: str | None
    """What WB said (None for "expired": nothing was sent)."""
    since: datetime
    """When it was first suspended (UTC); a renewal by a refused probe keeps it."""
    probe_at: datetime | None
    """When the next probe may go (None: none; an expired token waits for a new one)."""

    def covers(self, section: str) -> bool:
        """True when it applies to ``section`` (a whole-cabinet one applies to every section)."""
        return self.section is None or self.section == section


_SELECT = select(
    cabinet_suspensions.c.cabinet_id,
    cabinets.c.name,
    cabinet_suspensions.c.section,
    cabinet_suspensions.c.kind,
    cabinet_suspensions.c.words,
    cabinet_suspensions.c.since,
    cabinet_suspensions.c.probe_at,
).select_from(cabinet_suspensions.join(cabinets, cabinets.c.id == cabinet_suspensions.c.cabinet_id))


_OF_CABINET = _SELECT.where(cabinet_suspensions.c.cabinet_id == bindparam("cabinet_id")).order_by(
    cabinet_suspensions.c.section
)
"""A cabinet's suspensions, built once: every job reads it (through the driver, as its cabinet)."""


def _record(row: Any) -> Suspension:
    return Suspension(
        cabinet_id=row[0],
        cabinet=row[1],
        section=row[2] or None,
        kind=row[3],
        words=row[4],
        since=row[5],
        probe_at=row[6],
    )


class SuspensionRepository:
    """Store, read, claim a probe of and lift suspensions."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def all(self) -> list[Suspension]:
        """Every suspension in force, by cabinet and section: one query."""
        query = _SELECT.order_by(cabinet_suspensions.c.cabinet_id, cabinet_suspensions.c.section)
        async with self._db.connection() as conn:
            return [_record(row) for row in (await conn.execute(query)).all()]

    async def of_cabinet(self, cabinet_id: int) -> list[Suspension]:
        """The cabinet's suspensions in force (the whole cabinet's first): one statement built
        once, through the driver (a job's read, as its cabinet's)."""
        rows = await self._db.fetch(_OF_CABINET, {"cabinet_id": cabinet_id})
        return [
            _record(
                (
                    r["cabinet_id"],
                    r["name"],
                    r["section"],
                    r["kind"],
                    r["words"],
                    r["since"],
                    r["probe_at"],
                )
            )
            for r in rows
        ]

    async def suspend(
        self,
        cabinet_id: int,
        section: str | None,
        *,
        kind: str,
        words: str | None,
        probe_at: datetime | None,
    ) -> Suspension | None:
        """Suspend the cabinet (``section`` None) or one of its sections, or renew the
        suspension in force (its kind, words and probe time; ``since`` kept). None when the
        cabinet is gone."""
        if kind not in KINDS:
            raise ValueError(f"unknown suspension kind {kind!r}; kinds: {', '.join(KINDS)}")
        key = _WHOLE if section is None else section
        statement = self._db.upsert_statement(
            cabinet_suspensions,
            conflict=("cabinet_id", "section"),
            update=("kind", "words", "probe_at"),
        )
        values = {
            "cabinet_id": cabinet_id,
            "section": key,
            "kind": kind,
            "words": words,
            "since": utcnow(),
            "probe_at": probe_at,
        }
        async with self._db.transaction() as conn:
            alive = await conn.scalar(select(cabinets.c.id).where(cabinets.c.id == cabinet_id))
            if alive is None:
                return None
            await conn.execute(statement, values)
            row = (
                await conn.execute(
                    _SELECT.where(
                        and_(
                            cabinet_suspensions.c.cabinet_id == cabinet_id,
                            cabinet_suspensions.c.section == key,
                        )
                    )
                )
            ).one()
        return _record(row)

    async def claim_probe(
        self, cabinet_id: int, section: str | None, *, due: datetime, next_at: datetime
    ) -> bool:
        """Take the probe of a suspension whose ``probe_at`` is ``due`` (the value read),
        moving it to ``next_at``: True for the one caller that took it, False for the others
        (another job took it first, or it was lifted or renewed meanwhile)."""
        key = _WHOLE if section is None else section
        statement = (
            update(cabinet_suspensions)
            .where(
                cabinet_suspensions.c.cabinet_id == cabinet_id,
                cabinet_suspensions.c.section == key,
                cabinet_suspensions.c.probe_at == due,
            )
            .values(probe_at=next_at)
        )
        async with self._db.transaction() as conn:
            result = await conn.execute(statement)
        return bool(result.rowcount)

    async def lift(self, cabinet_id: int, section: str | None = None) -> list[Suspension]:
        """Lift the cabinet's suspensions (every one with ``section`` None, else that
        section's); what was lifted."""
        where = [cabinet_suspensions.c.cabinet_id == cabinet_id]
        if section is not None:
            where.append(cabinet_suspensions.c.section == section)
        async with self._db.transaction() as conn:
            found = (await conn.execute(_SELECT.where(*where))).all()
            if found:
                await conn.execute(delete(cabinet_suspensions).where(*where))
        lifted = [_record(row) for row in found]
        for gone in lifted:
            log.info(
                "cabinet %r: suspension of %s (%s) lifted",
                gone.cabinet,
                gone.section or "the whole cabinet",
                gone.kind,
            )
        return lifted

    async def lift_one(self, cabinet_id: int, section: str | None) -> bool:
        """Lift exactly one suspension: the whole cabinet's (``section`` None) or one
        section's; False when there was none."""
        key = _WHOLE if section is None else section
        statement = delete(cabinet_suspensions).where(
            cabinet_suspensions.c.cabinet_id == cabinet_id, cabinet_suspensions.c.section == key
        )
        async with self._db.transaction() as conn:
            result = await conn.execute(statement)
        return bool(result.rowcount)

    async def token_expiries(self) -> list[tuple[int, str, datetime | None]]:
        """(cabinet_id, name, token_expires_at) of every active cabinet, by id: one query."""
        query = (
            select(cabinets.c.id, cabinets.c.name, cabinets.c.token_expires_at)
            .where(cabinets.c.active.is_(True))
            .order_by(cabinets.c.id)
        )
        async with self._db.connection() as conn:
            return [(row[0], row[1], row[2]) for row in (await conn.execute(query)).all()]
