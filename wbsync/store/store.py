"""The storage façade: one object that the CLI, the workers and the demo hold."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from wbsync.store.cabinets import CabinetRepository
from wbsync.store.crypto import TokenCipher
from wbsync.store.cursors import CursorRepository
from wbsync.store.datasets import Dataset, KeyValue
from wbsync.store.db import Database
from wbsync.store.ledger import Ledger
from wbsync.store.rows import RowRepository
from wbsync.store.runs import RunRepository

__all__ = ["Store"]


class Store:
    """Cabinets, cursors, runs, synced rows and the send logs, over one started :class:`Database`.

    The constructor does no I/O; the database's lifecycle belongs to whoever created it.
    ``secret_key`` (``Settings.secret_key``) is needed only to store or reveal a token.
    """

    def __init__(self, database: Database, *, secret_key: str | None) -> None:
        self.database = database
        self.cabinets = CabinetRepository(database, TokenCipher(secret_key))
        self.cursors = CursorRepository(database)
        self.ledger = Ledger(database)
        self.runs = RunRepository(database)
        self._rows = RowRepository(database)

    def __repr__(self) -> str:
        return f"Store({self.database!r})"

    async def upsert(
        self, dataset: str | Dataset, cabinet_id: int, rows: Sequence[Mapping[str, Any]]
    ) -> int:
        """Insert or update WB rows of ``dataset`` for a cabinet; returns distinct keys written."""
        return await self._rows.upsert(dataset, cabinet_id, rows)

    async def count(self, dataset: str | Dataset, cabinet_id: int | None = None) -> int:
        """How many rows ``dataset`` holds (for one cabinet, or all)."""
        return await self._rows.count(dataset, cabinet_id)

    async def fetch(
        self,
        dataset: str | Dataset,
        cabinet_id: int,
        *,
        key: Mapping[str, KeyValue] | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        """A cabinet's stored WB rows of ``dataset``, ordered by natural key."""
        return await self._rows.fetch(dataset, cabinet_id, key=key, limit=limit, offset=offset)
