"""What wbsync sends to WB: append-only logs of bids and price uploads, and price targets."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ARRAY,
    BigInteger,
    Integer,
    Text,
    TextClause,
    bindparam,
    delete,
    insert,
    select,
    text,
    update,
)

from wbsync.store.db import Database
from wbsync.store.schema import (
    UtcDateTime,
    price_targets,
    sent_bids,
    sent_price_uploads,
    utcnow,
)

__all__ = ["Ledger", "PriceTarget", "PriceUpload", "SentBid"]


@dataclass(frozen=True, slots=True)
class SentBid:
    """One bid change WB applied (bids in base currency units, whichever method carried them)."""

    cabinet_id: int
    advert_id: int
    nm_id: int
    new_bid: int
    old_bid: int | None = None
    norm_query: str | None = None
    sent_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class PriceUpload:
    """One price upload task sent to WB: its task id, how many items, the body sent."""

    cabinet_id: int
    task_id: int | None
    items_count: int
    payload: Mapping[str, Any]
    sent_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class PriceTarget:
    """The price and discount pricing-bulk should upload for one item."""

    nm_id: int
    price: int | None
    discount: int | None


_PG_RECORD_BIDS: TextClause = text(
    """
INSERT INTO sent_bids (cabinet_id, advert_id, nm_id, norm_query, old_bid, new_bid, sent_at)
SELECT * FROM unnest(
  CAST(:cabinet_id AS integer[]), CAST(:advert_id AS bigint[]), CAST(:nm_id AS bigint[]),
  CAST(:norm_query AS text[]), CAST(:old_bid AS bigint[]), CAST(:new_bid AS bigint[]),
  CAST(:sent_at AS timestamptz[]))
"""
).bindparams(
    bindparam("cabinet_id", type_=ARRAY(Integer())),
    bindparam("advert_id", type_=ARRAY(BigInteger())),
    bindparam("nm_id", type_=ARRAY(BigInteger())),
    bindparam("norm_query", type_=ARRAY(Text())),
    bindparam("old_bid", type_=ARRAY(BigInteger())),
    bindparam("new_bid", type_=ARRAY(BigInteger())),
    bindparam("sent_at", type_=ARRAY(UtcDateTime())),
)
"""PostgreSQL: a batch of bids in one statement built once, each column as one array."""


class Ledger:
    """Append-only logs of what was sent to WB, and the price targets still to send."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def record_bids(self, bids: Sequence[SentBid]) -> None:
        """Append bid changes to ``sent_bids`` (``sent_at`` defaults to now).

        On PostgreSQL one statement (built once, through the driver, in autocommit) writes the
        whole batch: the autobidder records each batch of bids it sets, every run."""
        if not bids:
            return
        now = utcnow()
        if self._db.dialect == "postgresql":
            columns: dict[str, list[Any]] = {
                "cabinet_id": [b.cabinet_id for b in bids],
                "advert_id": [b.advert_id for b in bids],
                "nm_id": [b.nm_id for b in bids],
                "norm_query": [b.norm_query for b in bids],
                "old_bid": [b.old_bid for b in bids],
                "new_bid": [b.new_bid for b in bids],
                "sent_at": [b.sent_at or now for b in bids],
            }
            await self._db.fetch(_PG_RECORD_BIDS, columns)
            return
        params = [
            {
                "cabinet_id": b.cabinet_id,
                "advert_id": b.advert_id,
                "nm_id": b.nm_id,
                "norm_query": b.norm_query,
                "old_bid": b.old_bid,
                "new_bid": b.new_bid,
                "sent_at": b.sent_at or now,
            }
            for b in bids
        ]
        async with self._db.transaction() as conn:
            await conn.execute(insert(sent_bids), params)

    async def sent_bids(self, cabinet_id: int, *, limit: int = 1000) -> list[SentBid]:
        """A cabinet's most recent bid changes, newest first."""
        query = (
            select(sent_bids)
            .where(sent_bids.c.cabinet_id == cabinet_id)
            .order_by(sent_bids.c.sent_at.desc(), sent_bids.c.id.desc())
            .limit(limit)
        )
        async with self._db.connection() as conn:
            rows = (await conn.execute(query)).all()
        return [
            SentBid(
                cabinet_id=r.cabinet_id,
                advert_id=r.advert_id,
                nm_id=r.nm_id,
                new_bid=r.new_bid,
                old_bid=r.old_bid,
                norm_query=r.norm_query,
                sent_at=r.sent_at,
            )
            for r in rows
        ]

    async def begin_price_upload(self, cabinet_id: int, payload: Mapping[str, Any]) -> int:
        """Record the intent to upload ``payload`` (no task id yet) before it is sent; its id.

        An intent with the same payload left unfinished (the process died after sending, before
        ``finish_price_upload``) is returned instead of a new one: the upload is being sent
        again, and WB recognizes a repeated upload (208, the first task's id).
        """
        table = sent_price_uploads
        pending = (
            select(table.c.id, table.c.payload)
            .where(table.c.cabinet_id == cabinet_id, table.c.task_id.is_(None))
            .order_by(table.c.id)
        )
        async with self._db.transaction() as conn:
            for row in (await conn.execute(pending)).all():
                if dict(row.payload) == dict(payload):
                    return int(row.id)
            values = {
                "cabinet_id": cabinet_id,
                "task_id": None,
                "items_count": len(payload.get("data", ())),
                "payload": dict(payload),
                "sent_at": utcnow(),
            }
            result = await conn.execute(insert(table).values(values).returning(table.c.id))
            return int(result.scalar_one())

    async def finish_price_upload(self, upload_id: int, task_id: int) -> None:
        """Record WB's task id for the upload ``begin_price_upload`` recorded."""
        table = sent_price_uploads
        async with self._db.transaction() as conn:
            await conn.execute(update(table).where(table.c.id == upload_id).values(task_id=task_id))

    async def price_uploads(self, cabinet_id: int, *, limit: int = 100) -> list[PriceUpload]:
        """A cabinet's most recent price uploads, newest first."""
        table = sent_price_uploads
        query = (
            select(table)
            .where(table.c.cabinet_id == cabinet_id)
            .order_by(table.c.sent_at.desc(), table.c.id.desc())
            .limit(limit)
        )
        async with self._db.connection() as conn:
            rows = (await conn.execute(query)).all()
        return [
            PriceUpload(r.cabinet_id, r.task_id, r.items_count, dict(r.payload), r.sent_at)
            for r in rows
        ]

    async def set_price_targets(self, cabinet_id: int, targets: Sequence[PriceTarget]) -> int:
        """Insert or replace targets by item; returns how many items were written."""
        by_nm = {t.nm_id: t for t in targets}
        if not by_nm:
            return 0
        now = utcnow()
        statement = self._db.upsert_statement(
            price_targets,
            conflict=("cabinet_id", "nm_id"),
            update=("price", "discount", "updated_at"),
        )
        params = [
            {
                "cabinet_id": cabinet_id,
                "nm_id": t.nm_id,
                "price": t.price,
                "discount": t.discount,
                "updated_at": now,
            }
            for t in sorted(by_nm.values(), key=lambda t: t.nm_id)
        ]
        async with self._db.transaction() as conn:
            await conn.execute(statement, params)
        return len(params)

    async def price_targets(self, cabinet_id: int) -> list[PriceTarget]:
        """A cabinet's price targets, by item number."""
        query = (
            select(price_targets.c.nm_id, price_targets.c.price, price_targets.c.discount)
            .where(price_targets.c.cabinet_id == cabinet_id)
            .order_by(price_targets.c.nm_id)
        )
        async with self._db.connection() as conn:
            rows = (await conn.execute(query)).all()
        return [PriceTarget(r.nm_id, r.price, r.discount) for r in rows]

    async def clear_price_targets(
        self, cabinet_id: int, nm_ids: Sequence[int] | None = None
    ) -> int:
        """Delete some (or all) of a cabinet's targets, e.g. once uploaded; returns how many."""
        query = delete(price_targets).where(price_targets.c.cabinet_id == cabinet_id)
        if nm_ids is not None:
            query = query.where(price_targets.c.nm_id.in_(list(nm_ids)))
        async with self._db.transaction() as conn:
            result = await conn.execute(query)
        return int(result.rowcount)
