"""The keys a snapshot run has seen, kept in numbered slots (``wb_snapshot_keys``).

A stored page of a run records its keys' 8-byte digests in the page's own transaction: the run's
row (``wb_snapshot_runs``) hands out the next slots, one per ``SLOT_DIGESTS`` digests, and the
slots are upserted. A run starts again from slot 0, so every run overwrites the rows of the one
before in place: nothing is deleted, and on PostgreSQL the old versions are reclaimed by page
pruning (HOT updates), with or without autovacuum. A slot's row stays under PostgreSQL's TOAST
threshold (about 2 KB), so an update never goes through the TOAST table either.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import (
    Integer,
    Select,
    String,
    Table,
    TextClause,
    and_,
    bindparam,
    func,
    select,
    text,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from wbsync.store.datasets import KeyValue
from wbsync.store.db import Database
from wbsync.store.schema import pg_quote, snapshot_keys, snapshot_runs

__all__ = [
    "DIGEST_BYTES",
    "SLOT_DIGESTS",
    "key_digest",
    "pg_finish_if_all_seen",
    "record_seen",
    "run_progress",
    "seen_digests",
    "slot_chunks",
]

DIGEST_BYTES = 8
#: Digests per ``wb_snapshot_keys`` row: 1,600 bytes, under PostgreSQL's TOAST threshold.
SLOT_DIGESTS = 200
_SLOT_BYTES = SLOT_DIGESTS * DIGEST_BYTES


def key_digest(key: tuple[KeyValue, ...]) -> bytes:
    """``DIGEST_BYTES`` bytes standing for a natural key in a snapshot run's seen set.

    Two keys sharing a digest (odds about n²/2⁶⁵ for n keys) would only keep a deleted row
    live until a later run: the safe direction.
    """
    return hashlib.blake2b(repr(key).encode(), digest_size=DIGEST_BYTES).digest()


def slot_chunks(digests: bytes) -> list[bytes]:
    """Packed ``digests`` cut into the contents of consecutive slots."""
    return [digests[i : i + _SLOT_BYTES] for i in range(0, len(digests), _SLOT_BYTES)]


async def record_seen(
    conn: AsyncConnection, database: Database, cabinet_id: int, dataset: str, digests: bytes
) -> bool:
    """Record a page's packed ``digests`` in the cabinet's run of ``dataset`` in progress, in the
    caller's transaction; False (nothing recorded) when no run is in progress."""
    if not digests:
        return True
    chunks = slot_chunks(digests)
    count = len(chunks)
    end = await conn.scalar(
        update(snapshot_runs)
        .where(
            snapshot_runs.c.cabinet_id == cabinet_id,
            snapshot_runs.c.dataset == dataset,
            snapshot_runs.c.active.is_(True),
        )
        .values(slots=snapshot_runs.c.slots + count)
        .returning(snapshot_runs.c.slots)
    )
    if end is None:
        return False
    first = int(end) - count
    statement = database.upsert_statement(
        snapshot_keys, conflict=("cabinet_id", "dataset", "slot"), update=("digests",)
    )
    await conn.execute(
        statement,
        [
            {
                "cabinet_id": cabinet_id,
                "dataset": dataset,
                "slot": first + i,
                "digests": chunk,
            }
            for i, chunk in enumerate(chunks)
        ],
    )
    return True


def run_progress(table: Table) -> Select[tuple[int, datetime, int, bytes | None]]:
    """The active run of (``:cabinet_id``, ``:dataset``) and what it saw, in one query: a row
    per slot of the run (one with no digests when it has none), each with the run's start
    (``started_seq``, ``started_at``) and ``live``, the cabinet's live rows in ``table``. No
    row: no run in progress."""
    runs, keys = snapshot_runs, snapshot_keys
    live = (
        select(func.count())
        .select_from(table)
        .where(table.c.cabinet_id == bindparam("cabinet_id"), table.c.deleted_at.is_(None))
        .scalar_subquery()
    )
    slots = and_(
        keys.c.cabinet_id == runs.c.cabinet_id,
        keys.c.dataset == runs.c.dataset,
        keys.c.slot < runs.c.slots,  # later slots are an earlier run's
    )
    return (
        select(runs.c.started_seq, runs.c.started_at, live.label("live"), keys.c.digests)
        .select_from(runs.outerjoin(keys, slots))
        .where(
            runs.c.cabinet_id == bindparam("cabinet_id"),
            runs.c.dataset == bindparam("dataset"),
            runs.c.active.is_(True),
        )
    )


def pg_finish_if_all_seen(table: Table) -> TextClause:
    """PostgreSQL: finish the active run of (``:cabinet_id``, ``:dataset``) in one statement
    when it saw as many distinct keys as the cabinet has live rows in ``table`` (then none is
    unseen: ``SnapshotRepository.complete``), counting the distinct digests in the database.
    Its row: ``runs`` (0: no run in progress) and ``finished`` (1: the run was finished)."""
    name = pg_quote(table.name)
    return text(f"""
WITH run AS (
  SELECT started_at, slots FROM {snapshot_runs.name}
  WHERE cabinet_id = :cabinet_id AND dataset = :dataset AND active
), seen AS (
  SELECT count(DISTINCT substring(k.digests FROM g * {DIGEST_BYTES} + 1 FOR {DIGEST_BYTES})) AS n
  FROM run
  JOIN {snapshot_keys.name} AS k
    ON k.cabinet_id = :cabinet_id AND k.dataset = :dataset AND k.slot < run.slots
  CROSS JOIN LATERAL generate_series(0, length(k.digests) / {DIGEST_BYTES} - 1) AS g
), live AS (
  SELECT count(*) AS n FROM {name} WHERE cabinet_id = :cabinet_id AND deleted_at IS NULL
), done AS (
  UPDATE {snapshot_runs.name} AS r SET active = false, slots = 0
  FROM run, seen, live
  WHERE r.cabinet_id = :cabinet_id AND r.dataset = :dataset AND r.started_at = run.started_at
    AND seen.n = live.n
  RETURNING 1
)
SELECT (SELECT count(*) FROM run) AS runs, (SELECT count(*) FROM done) AS finished
""").bindparams(bindparam("cabinet_id", type_=Integer()), bindparam("dataset", type_=String()))


def seen_digests(slots: Iterable[bytes | None]) -> set[bytes]:
    """The distinct digests in a run's slots."""
    seen: set[bytes] = set()
    for digests in slots:
        if digests:
            blob = bytes(digests)
            seen.update(blob[i : i + DIGEST_BYTES] for i in range(0, len(blob), DIGEST_BYTES))
    return seen
