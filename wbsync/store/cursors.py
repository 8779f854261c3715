"""Sync cursors: where each (cabinet, sync) left off, kept across runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.dml import Insert

from wbsync.store.db import Database
from wbsync.store.schema import sync_cursors, utcnow

__all__ = ["CursorRepository"]


class CursorRepository:
    """Read and write the ``wb_sync_cursors`` table (one JSON cursor per cabinet and sync)."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def get(self, cabinet_id: int, sync: str) -> Any:
        """The saved cursor as stored (the sync checks its shape before it follows it), or None
        when this sync never saved one for the cabinet."""
        query = select(sync_cursors.c.cursor).where(
            sync_cursors.c.cabinet_id == cabinet_id, sync_cursors.c.sync == sync
        )
        return (await self._db.execute(query)).scalar()

    async def save(self, cabinet_id: int, sync: str, cursor: Mapping[str, Any]) -> None:
        """Replace the cabinet's cursor for ``sync`` (JSON-serialisable values only)."""
        await self._db.fetch(self._statement(), self._params(cabinet_id, sync, cursor))

    async def save_in(
        self, conn: AsyncConnection, cabinet_id: int, sync: str, cursor: Mapping[str, Any]
    ) -> None:
        """``save`` inside ``conn``'s transaction (with the page the cursor follows)."""
        await conn.execute(self._statement(), self._params(cabinet_id, sync, cursor))

    def _statement(self) -> Insert:
        return self._db.upsert_statement(
            sync_cursors, conflict=("cabinet_id", "sync"), update=("cursor", "updated_at")
        )

    @staticmethod
    def _params(cabinet_id: int, sync: str, cursor: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "cabinet_id": cabinet_id,
            "sync": sync,
            "cursor": dict(cursor),
            "updated_at": utcnow(),
        }

    async def reset(self, cabinet_id: int, sync: str) -> bool:
        """Forget the cursor so the next run starts from scratch; True if one existed."""
        async with self._db.transaction() as conn:
            result = await conn.execute(
                delete(sync_cursors).where(
                    sync_cursors.c.cabinet_id == cabinet_id, sync_cursors.c.sync == sync
                )
            )
        return bool(result.rowcount)
