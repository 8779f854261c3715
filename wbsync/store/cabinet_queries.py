"""The statements and predicates cabinets are read with: live (not removed) cabinets, by id or
name, a job's read of its cabinet with a sync's cursor, and whether a suspension is in force.

A job's reads are statements built once (``BY_ID``, ``WITH_CURSOR``), as is the write of a
token's expiry a cabinet's first job may make (``SET_EXPIRY``): SQLAlchemy finds their compiled
forms without computing a cache key per call.
"""

from __future__ import annotations

from sqlalchemy import bindparam, false, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import ColumnElement

from wbsync.store.cabinets import REMOVED_PREFIX, CabinetRef
from wbsync.store.schema import CABINET_ID_MAX, cabinet_suspensions, cabinets, sync_cursors

__all__ = [
    "BY_ID",
    "BY_ID_ANY",
    "LIVE",
    "SET_EXPIRY",
    "SUSPENDED",
    "WITH_CURSOR",
    "count_live",
    "live",
    "match",
    "possible_id",
    "removed_match",
]


SUSPENDED = (
    select(cabinet_suspensions.c.cabinet_id)
    .where(cabinet_suspensions.c.cabinet_id == cabinets.c.id)
    .exists()
    .label("suspended")
)
"""Whether the cabinet has a suspension in force: a job's read of its cabinet says it, so the
job reads the suspensions themselves only when there are some."""

LIVE = cabinets.c.removed_at.is_(None)

BY_ID_ANY = select(cabinets, SUSPENDED).where(cabinets.c.id == bindparam("cabinet_id"))
"""A cabinet by its id, removed or not, built once (see ``WITH_CURSOR``)."""

BY_ID = BY_ID_ANY.where(LIVE)
"""A cabinet not removed by its id, built once."""

WITH_CURSOR = (
    select(cabinets, sync_cursors.c.cursor, SUSPENDED)
    .select_from(
        cabinets.outerjoin(
            sync_cursors,
            (sync_cursors.c.cabinet_id == bindparam("cabinet_id"))
            & (sync_cursors.c.sync == bindparam("sync")),
        )
    )
    .where(cabinets.c.id == bindparam("cabinet_id"), LIVE)
)
"""A cabinet (not removed) joined with one sync's cursor; built once, so SQLAlchemy finds its
compiled form without computing the statement's cache key (a statement built per call cost
~0.2 ms a job)."""

SET_EXPIRY = (
    update(cabinets)
    .where(cabinets.c.id == bindparam("cabinet_id"))
    .values(token_expires_at=bindparam("expires_at"))
)
"""Keep one cabinet's token expiry; built once (see ``WITH_CURSOR``)."""


def possible_id(ref: CabinetRef) -> bool:
    """True for an id a cabinet can have; False for a name or an id out of range."""
    # bool is an int subclass; True as a cabinet id is a caller bug, not cabinet 1.
    if isinstance(ref, bool):
        raise TypeError("a cabinet reference is an id (int) or a name (str)")
    return isinstance(ref, int) and 1 <= ref <= CABINET_ID_MAX


def live(ref: CabinetRef) -> ColumnElement[bool]:
    """The cabinet of that id or name, not removed."""
    return match(ref) & LIVE


def match(ref: CabinetRef) -> ColumnElement[bool]:
    """The cabinet of that id or name, removed or not."""
    # A reference no cabinet can have matches nothing, rather than reaching the database, which
    # refuses it (PostgreSQL: integer out of range, NUL in text) with an error of its own.
    if possible_id(ref):
        return cabinets.c.id == ref
    if isinstance(ref, int):
        return false()
    return cabinets.c.name == ref if "\x00" not in ref else false()


def removed_match(ref: CabinetRef) -> ColumnElement[bool]:
    """A removed cabinet by the name it had (``removed_name``)."""
    if isinstance(ref, int) or "\x00" in ref:
        return false()
    return cabinets.c.name.like(f"{REMOVED_PREFIX}%: " + ref.replace("%", "_"))


async def count_live(conn: AsyncConnection) -> int:
    """How many cabinets are not removed."""
    query = select(func.count()).select_from(cabinets).where(LIVE)
    return int(await conn.scalar(query) or 0)
