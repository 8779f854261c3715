"""PostgreSQL: a page of rows in one statement (``RowRepository.write``'s fast path).

Data-modifying CTEs, run in autocommit (one round trip, no BEGIN or COMMIT): the statement is
its own transaction, so the sequence row it locks stays locked until it commits, as in the
transaction of the general path. ``lock`` takes the row FOR UPDATE; when another writer holds
it, READ COMMITTED waits for that commit and then re-reads the row's newest version (the lock
follows the update chain), so ``last_seq`` is the other writer's advance, not the statement
snapshot's. ``adv`` updates the same row: its snapshot version is stale, so the update follows
the chain to the newest version (locked by this statement, so no wait) and sets the number
computed from the newest ``last_seq``: nothing is lost. Every CTE that writes reads ``lock``
first (the upsert joins it, the others test it), so the sequence row is locked before any
row, slot or cursor, as in the general path; rows are inserted in key order (``ord``).
``lock`` takes the row only when the statement has something to write: a row of the page that
is not stored live with the same data, a row a whole page tombstones (``absent``), or a
snapshot run's keys, its begin or a cursor. A page WB sent again unchanged (most of a steady
state's polls) then takes no lock and writes nothing: no transaction id, no WAL, no wait behind
the dataset's other writers. Its check reads the rows in the statement's snapshot; the only
writer of a cabinet's rows is its one live job, so nothing else can make a row differ in
between. Without a sequence row (a plugin's dataset's first write, ``known`` 0) nothing is
written and the caller takes the general path, which creates it. The rows come as one JSON
array in UTF-8 bytes (``bytea``, decoded by the server): as a ``jsonb`` parameter they would
be decoded to a ``str`` and encoded back on the client, with their keys sorted (canonical
text only SQLite's change check needs), which cost more than writing the page's JSON
(docs/scaling.md).
"""

from __future__ import annotations

import functools
from typing import Any

from sqlalchemy import (
    ARRAY,
    JSON,
    BigInteger,
    Boolean,
    Integer,
    LargeBinary,
    String,
    Text,
    TextClause,
    bindparam,
    text,
)

from wbsync.store.datasets import Dataset
from wbsync.store.schema import UtcDateTime, dataset_table, pg_quote

__all__ = ["PG_KEY_ARRAYS", "PG_KEY_TYPES", "pg_page_statement"]

#: A key column's values as one array parameter: its SQL type, and the bound parameter's type.
PG_KEY_TYPES = {"int": "bigint[]", "str": "text[]", "date": "text[]"}
PG_KEY_ARRAYS: dict[str, ARRAY[Any]] = {
    "int": ARRAY(BigInteger()),
    "str": ARRAY(Text()),
    "date": ARRAY(Text()),
}


@functools.cache
def pg_page_statement(ds: Dataset) -> TextClause:
    """The dataset's page statement, generated once (a dataset declared again gets its own)."""
    keys = [pg_quote(k.column) for k in ds.key]
    params = [f"k{i}" for i in range(len(ds.key))]
    name = pg_quote(dataset_table(ds).name)
    unnest = ", ".join(
        f"CAST(:{p} AS {PG_KEY_TYPES[k.kind]})" for p, k in zip(params, ds.key, strict=True)
    )
    conflict = ", ".join(["cabinet_id", *keys])
    sql = f"""
WITH page AS (
  SELECT {", ".join(f"k.{k}" for k in keys)}, d.data, k.ord
  FROM unnest({unnest}) WITH ORDINALITY AS k({", ".join(keys)}, ord)
  JOIN jsonb_array_elements(CAST(convert_from(:data, 'UTF8') AS jsonb))
    WITH ORDINALITY AS d(data, ord)
    ON d.ord = k.ord
), absent AS (
  SELECT {", ".join(f"o.{k}" for k in keys)},
    row_number() OVER (ORDER BY {", ".join(f"o.{k}" for k in keys)}) AS ord
  FROM {name} AS o
  WHERE CAST(:whole AS boolean) AND o.cabinet_id = :cabinet_id AND o.deleted_at IS NULL
    AND ({", ".join(f"o.{k}" for k in keys)}) NOT IN (
      SELECT {", ".join(f"page.{k}" for k in keys)} FROM page)
), lock AS (
  SELECT last_seq, GREATEST(CAST(:now AS timestamptz), last_changed_at) AS stamp
  FROM wb_change_sequences
  WHERE dataset = :dataset AND (
    CAST(:begin AS boolean) OR CAST(:seen_slots AS integer) > 0 OR CAST(:sync AS text) IS NOT NULL
    OR EXISTS (SELECT 1 FROM absent)
    OR EXISTS (
      SELECT 1 FROM page WHERE NOT EXISTS (
        SELECT 1 FROM {name} AS t
        WHERE t.cabinet_id = :cabinet_id AND {" AND ".join(f"t.{k} = page.{k}" for k in keys)}
          AND t.deleted_at IS NULL AND t.data = page.data
      )
    )
  )
  FOR UPDATE
), up AS (
  INSERT INTO {name} AS t
    (cabinet_id, {", ".join(keys)}, data, changed_at, seq, deleted_at, inserted_seq)
  SELECT CAST(:cabinet_id AS integer), {", ".join(f"page.{k}" for k in keys)}, page.data,
         lock.stamp, lock.last_seq + page.ord, NULL, lock.last_seq + page.ord
  FROM lock CROSS JOIN page ORDER BY page.ord
  ON CONFLICT ({conflict}) DO UPDATE
    SET data = excluded.data, changed_at = excluded.changed_at, seq = excluded.seq,
        deleted_at = excluded.deleted_at,
        inserted_seq = CASE WHEN t.deleted_at IS NOT NULL THEN excluded.inserted_seq
                            ELSE t.inserted_seq END
    WHERE t.data IS DISTINCT FROM excluded.data OR t.deleted_at IS NOT NULL
  RETURNING t.seq
), gone AS (
  UPDATE {name} AS t
  SET deleted_at = lock.stamp, changed_at = lock.stamp,
      seq = lock.last_seq + CAST(:page_rows AS bigint) + absent.ord
  FROM lock, absent
  WHERE t.cabinet_id = :cabinet_id AND {" AND ".join(f"t.{k} = absent.{k}" for k in keys)}
  RETURNING t.seq
), ends AS (
  SELECT (SELECT count(*) FROM up) AS changed, (SELECT count(*) FROM gone) AS tombstoned,
    (SELECT max(seq) FROM (SELECT seq FROM up UNION ALL SELECT seq FROM gone) AS w) AS last
), adv AS (
  UPDATE wb_change_sequences AS s SET last_seq = ends.last, last_changed_at = lock.stamp
  FROM ends, lock
  WHERE s.dataset = :dataset AND ends.last IS NOT NULL
), began AS (
  INSERT INTO wb_snapshot_runs AS r (cabinet_id, dataset, started_seq, started_at, slots, active)
  SELECT CAST(:cabinet_id AS integer), CAST(:dataset AS text), lock.last_seq,
    CAST(:begun_at AS timestamptz), CAST(:seen_slots AS integer), true
  FROM lock WHERE CAST(:begin AS boolean)
  ON CONFLICT (cabinet_id, dataset) DO UPDATE
    SET started_seq = excluded.started_seq, started_at = excluded.started_at,
        slots = excluded.slots, active = excluded.active
  RETURNING slots
), run AS (
  UPDATE wb_snapshot_runs SET slots = slots + CAST(:seen_slots AS integer)
  WHERE cabinet_id = :cabinet_id AND dataset = :dataset AND active
    AND CAST(:seen_slots AS integer) > 0 AND NOT CAST(:begin AS boolean)
    AND EXISTS (SELECT 1 FROM lock)
  RETURNING slots
), slot_rows AS (
  INSERT INTO wb_snapshot_keys (cabinet_id, dataset, slot, digests)
  SELECT CAST(:cabinet_id AS integer), CAST(:dataset AS text),
    run.slots - CAST(:seen_slots AS integer) + d.ord - 1, d.digests
  FROM (SELECT slots FROM began UNION ALL SELECT slots FROM run) AS run
    CROSS JOIN unnest(CAST(:seen AS bytea[])) WITH ORDINALITY AS d(digests, ord)
  ON CONFLICT (cabinet_id, dataset, slot) DO UPDATE SET digests = excluded.digests
), cur AS (
  INSERT INTO wb_sync_cursors (cabinet_id, sync, cursor, updated_at)
  SELECT CAST(:cabinet_id AS integer), CAST(:sync AS text), CAST(:cursor AS json),
    CAST(:cursor_at AS timestamptz)
  WHERE CAST(:sync AS text) IS NOT NULL AND EXISTS (SELECT 1 FROM lock)
  ON CONFLICT (cabinet_id, sync) DO UPDATE
    SET cursor = excluded.cursor, updated_at = excluded.updated_at
)
SELECT (SELECT count(*) FROM wb_change_sequences WHERE dataset = :dataset) AS known,
  ends.changed, ends.tombstoned, ends.last, (SELECT last_seq FROM lock) AS base
FROM ends
"""
    return text(sql).bindparams(
        *(bindparam(p, type_=PG_KEY_ARRAYS[k.kind]) for p, k in zip(params, ds.key, strict=True)),
        bindparam("data", type_=LargeBinary()),
        bindparam("dataset", type_=String()),
        bindparam("cabinet_id", type_=Integer()),
        bindparam("now", type_=UtcDateTime()),
        bindparam("seen_slots", type_=Integer()),
        bindparam("seen", type_=ARRAY(LargeBinary())),
        bindparam("begin", type_=Boolean()),
        bindparam("begun_at", type_=UtcDateTime()),
        bindparam("sync", type_=String()),
        bindparam("cursor", type_=JSON()),
        bindparam("cursor_at", type_=UtcDateTime()),
        bindparam("whole", type_=Boolean()),
        bindparam("page_rows", type_=Integer()),
    )
