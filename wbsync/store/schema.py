"""The tables, in SQLAlchemy Core: wbsync's own (``metadata``), which its Alembic migrations
must reproduce, and each dataset's standard table (``declared_metadata``), built from the
dataset's declaration.

A migration test compares ``metadata`` with a migrated database, so a change here without a
migration (or the reverse) fails the build; another proves that a database built fresh and one
upgraded from an early revision hold the same schema, and that the dataset tables the
migrations made are exactly what their declarations build (docs/storage.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Dialect,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import JSONB

from wbsync.store.datasets import KEY_STR_MAX, Dataset, KeyKind, dataset
from wbsync.system.clock import now_ms

__all__ = [
    "CABINET_ID_MAX",
    "RowData",
    "UtcDateTime",
    "cabinet_suspensions",
    "cabinets",
    "change_sequences",
    "dataset_table",
    "declared_datasets",
    "declared_metadata",
    "key_checks",
    "metadata",
    "model",
    "pg_quote",
    "price_targets",
    "sent_bids",
    "sent_price_uploads",
    "snapshot_keys",
    "snapshot_runs",
    "sync_cursors",
    "sync_runs",
    "utcnow",
]

_PG_DIALECT: Dialect = postgresql.dialect()  # type: ignore[no-untyped-call]


def pg_quote(name: str) -> str:
    """``name`` as a PostgreSQL identifier in SQL text, quoted where it must be (a plugin's
    dataset may bring capitals or dashes to its table's name)."""
    return str(_PG_DIALECT.identifier_preparer.quote(name))


# Explicit constraint names, identical on SQLite and PostgreSQL, so migrations can refer to them.
metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


def utcnow() -> datetime:
    """Now, timezone-aware UTC, read through the project clock."""
    return datetime.fromtimestamp(now_ms() / 1000.0, tz=UTC)


class UtcDateTime(TypeDecorator[datetime]):
    """A timestamp that always goes in and comes out timezone-aware UTC.

    SQLite has no timezone type and hands back naive values; this makes both backends agree.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Refuse naive datetimes; store UTC."""
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UtcDateTime column")
        return value.astimezone(UTC)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        """Attach UTC where the backend dropped the zone."""
        if value is None:
            return None
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


CABINET_ID_MAX = 2**31 - 1
"""The largest cabinet id: ``Integer`` is 32 bits on PostgreSQL (SQLite's is wider, never used)."""


def _cabinet_fk(*, primary_key: bool = True) -> Column[int]:
    """The owning cabinet: part of the key of per-cabinet tables, else an indexed column."""
    return Column(
        "cabinet_id",
        Integer,
        ForeignKey("cabinets.id", ondelete="CASCADE"),
        primary_key=primary_key,
        autoincrement=False,
        nullable=False,
        index=not primary_key,
    )


cabinets = Table(
    "cabinets",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(200), nullable=False),
    # Fernet ciphertext (urlsafe base64); never the token itself.
    Column("token_encrypted", Text, nullable=False),
    Column("seller_id", String(64), nullable=False),
    Column("active", Boolean, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    # Set by ``remove``: the cabinet is gone for syncing and listing, but its record stays (its
    # rows' tombstones refer to it, the feed routes answer for it) until pruning finishes the
    # removal once its tombstones' grace is over.
    Column("removed_at", UtcDateTime, nullable=True),
    # The token's ``exp``, known when it is stored: an expired token is never sent. NULL for a
    # token stored before it was kept, until the token is next decrypted.
    Column("token_expires_at", UtcDateTime, nullable=True),
    UniqueConstraint("name"),
)

# One row (id 1): a known value encrypted with the secret key the stored tokens are sealed with,
# so a wrong key is found at start rather than at the first token read.
key_checks = Table(
    "key_checks",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("sealed", Text, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
)

sync_cursors = Table(
    "wb_sync_cursors",
    metadata,
    _cabinet_fk(),
    Column("sync", String(100), primary_key=True),
    Column("cursor", JSON, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
)

# The last successful run and the last failure of each (cabinet, sync): they outlive the jobs
# (finished jobs are removed from Redis), so the operator can see what is stuck and why.
sync_runs = Table(
    "sync_runs",
    metadata,
    _cabinet_fk(),
    Column("sync", String(100), primary_key=True),
    Column("success_at", UtcDateTime, nullable=True),
    Column("success_pages", Integer, nullable=True),
    Column("success_rows", Integer, nullable=True),
    Column("failure_at", UtcDateTime, nullable=True),
    Column("failure_reason", Text, nullable=True),
    Column("failure_attempts", Integer, nullable=True),
)

# What WB refused for good, per cabinet (``section`` "": the whole cabinet, its token) or per
# (cabinet, section): the fan-out feeds nothing suspended; a new token, an operator or a probe
# that WB accepts lifts it.
cabinet_suspensions = Table(
    "cabinet_suspensions",
    metadata,
    _cabinet_fk(),
    Column("section", String(100), primary_key=True),
    Column("kind", String(20), nullable=False),
    Column("words", Text, nullable=True),
    Column("since", UtcDateTime, nullable=False),
    Column("probe_at", UtcDateTime, nullable=True),
)

sent_bids = Table(
    "sent_bids",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    _cabinet_fk(primary_key=False),
    Column("advert_id", BigInteger, nullable=False),
    Column("nm_id", BigInteger, nullable=False),
    Column("norm_query", Text, nullable=True),
    Column("old_bid", BigInteger, nullable=True),
    Column("new_bid", BigInteger, nullable=False),
    Column("sent_at", UtcDateTime, nullable=False),
)

sent_price_uploads = Table(
    "sent_price_uploads",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    _cabinet_fk(primary_key=False),
    Column("task_id", BigInteger, nullable=True),
    Column("items_count", Integer, nullable=False),
    Column("payload", JSON, nullable=False),
    Column("sent_at", UtcDateTime, nullable=False),
)

price_targets = Table(
    "price_targets",
    metadata,
    _cabinet_fk(),
    Column("nm_id", BigInteger, primary_key=True, autoincrement=False),
    Column("price", BigInteger, nullable=True),
    Column("discount", Integer, nullable=True),
    Column("updated_at", UtcDateTime, nullable=False),
)

# The standard tables ``Database.migrate`` created from datasets' declarations (every dataset's
# but those wbsync's migrations made, ``declared.MIGRATED_DATASETS``): which, by whom, and on
# which key, so a changed key is found, not guessed.
declared_datasets = Table(
    "wb_declared_datasets",
    metadata,
    Column("dataset", String(100), primary_key=True),
    Column("table_name", String(120), nullable=False),
    Column("owner", String(100), nullable=False),
    Column("key", JSON, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
)

# The last change sequence number given out per dataset. Its row is also the lock that orders
# a dataset's writers (see wbsync.store.rows): sequence numbers commit in the order they are given.
change_sequences = Table(
    "wb_change_sequences",
    metadata,
    Column("dataset", String(100), primary_key=True),
    Column("last_seq", BigInteger, nullable=False),
    # The feed's low-water mark: the lowest ``after`` from which it is complete (pruning a
    # tombstone raises it to the tombstone's ``seq``).
    Column("low_seq", BigInteger, nullable=False, server_default=text("0")),
    # The last ``changed_at`` given out: a writer stamps its rows no earlier, under the lock, so
    # ``changed_at`` never decreases along ``seq`` whatever the writers' clocks.
    Column("last_changed_at", UtcDateTime, nullable=True),
)

# The snapshot run per (cabinet, dataset): one row kept and updated in place (never deleted, so
# PostgreSQL reclaims its old versions by page pruning, without VACUUM). ``active``: a run is in
# progress, begun at sequence number ``started_seq``; ``slots``: how many ``wb_snapshot_keys``
# rows (slots 0 .. slots - 1) hold the keys it has seen so far.
snapshot_runs = Table(
    "wb_snapshot_runs",
    metadata,
    _cabinet_fk(),
    Column("dataset", String(100), primary_key=True),
    Column("started_seq", BigInteger, nullable=False),
    Column("started_at", UtcDateTime, nullable=False),
    Column("slots", Integer, nullable=False, server_default=text("0")),
    Column("active", Boolean, nullable=False, server_default=false()),
)

# The keys a snapshot run saw: 8-byte key digests, packed ``SLOT_DIGESTS`` to a row so a row stays
# inline (no TOAST), in numbered slots that each run overwrites from 0 (updated in place, never
# deleted: the table's size is its largest run's, not the sum of its runs'). On PostgreSQL the
# table's fillfactor leaves room on each page for the next version of its rows (HOT updates).
snapshot_keys = Table(
    "wb_snapshot_keys",
    metadata,
    _cabinet_fk(),
    Column("dataset", String(100), primary_key=True),
    Column("slot", Integer, primary_key=True, autoincrement=False),
    Column("digests", LargeBinary, nullable=False),
    postgresql_with={"fillfactor": 50},
)

_KEY_TYPES: dict[KeyKind, Any] = {"int": BigInteger, "str": String(KEY_STR_MAX), "date": String(10)}

RowData = JSON().with_variant(JSONB(), "postgresql")
"""A WB row: ``JSONB`` on PostgreSQL (compared, indexed and queried by field), JSON text on SQLite
(written canonically, keys sorted, so equal data is equal text)."""


declared_metadata = MetaData(naming_convention=metadata.naming_convention)
"""The standard table of every registered dataset, built from its declaration (wbsync's built-in
syncs' and plugins' alike): ``Database.migrate`` creates those the database lacks."""

# Its tables refer to the cabinets table: a copy here resolves the foreign key (never created).
cabinets.to_metadata(declared_metadata)

_tables: dict[str, tuple[Dataset, Table]] = {}


def _standard_table(ds: Dataset, into: MetaData) -> Table:
    # The natural key is the primary key: ON CONFLICT needs exactly this unique index.
    key_columns = [
        Column(k.column, _KEY_TYPES[k.kind], primary_key=True, autoincrement=False) for k in ds.key
    ]
    return Table(
        ds.table_name,
        into,
        _cabinet_fk(),
        *key_columns,
        Column("data", RowData, nullable=False),
        # When ``data`` last changed (or the row was tombstoned): not when it was last seen.
        Column("changed_at", UtcDateTime, nullable=False),
        # The change sequence number of the row's last write: what the change feed pages by.
        Column("seq", BigInteger, nullable=False),
        # Set when a complete snapshot run no longer saw the row (a tombstone); None when live.
        Column("deleted_at", UtcDateTime, nullable=True),
        # The ``seq`` of the row's first live write (an insert, or a return from a tombstone):
        # the feed's ``op`` is ``insert`` when it is ``seq``. NULL for rows written before 0008.
        Column("inserted_seq", BigInteger, nullable=True),
        # What wbsync notes about the row beside WB's data (``Dataset.columns``).
        *(Column(name, Text, nullable=True) for name in ds.columns),
        Index(None, "seq", unique=True),
        Index(None, "cabinet_id", "seq"),
        comment=f"WB rows of {ds.source}",
    )


def dataset_table(name_or_dataset: str | Dataset) -> Table:
    """The standard table of a registered dataset, built from its declaration when first asked
    for (datasets are registered by the syncs that store them, after this module is imported)."""
    ds = dataset(name_or_dataset)
    built = _tables.get(ds.name)
    if built is not None and built[0] == ds:
        return built[1]
    if built is not None:  # declared again, differently (a test, or a plugin reloaded)
        declared_metadata.remove(built[1])
    table = _standard_table(ds, declared_metadata)
    _tables[ds.name] = (ds, table)
    return table


def model(datasets: Iterable[str]) -> MetaData:
    """wbsync's whole schema as it should stand: its own tables and the standard tables of
    ``datasets`` (built from their declarations), in one MetaData (for comparing a database
    with, never for creating it: ``Database.migrate`` does that)."""
    whole = MetaData(naming_convention=metadata.naming_convention)
    for table in metadata.tables.values():
        table.to_metadata(whole)
    for name in datasets:
        dataset_table(name).to_metadata(whole)
    return whole
