"""The change feed: JSONB rows, when each last changed, a sequence number per write, tombstones.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03

On every dataset table (wbsync's own, and the standard tables of plugins' datasets recorded in
``wb_declared_datasets``): ``updated_at`` becomes ``changed_at``; ``seq`` (the change sequence
number of the row's last write, indexed alone and per cabinet) and ``deleted_at`` (a tombstone)
are added; on PostgreSQL ``data`` becomes ``JSONB``. Existing rows are numbered in key order, so
a reader starting from 0 reads them all. New tables: ``wb_change_sequences`` (the last number
given out per dataset), ``wb_snapshot_runs`` and ``wb_snapshot_keys`` (a snapshot run in progress
and the keys it saw).

Large tables (PostgreSQL): the type change and the numbering are one ``ALTER TABLE`` per table,
so each table is rewritten once, holding an ``ACCESS EXCLUSIVE`` lock (no reads or writes of that
table) for the rewrite plus its index builds: roughly the time to copy the table (docs/data.md:
1,000,000 stock rows, 36 s). Tables are converted one after the other, each in the migration's one
transaction, so the locks of converted tables are held until the end: stop the workers and the
API for the migration of a large database. On SQLite the columns are added in place and the
numbering is one ``UPDATE`` per table.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The datasets whose tables revision 0001 created.
_BUILTIN = (
    "finance_report",
    "orders",
    "sales",
    "adverts",
    "advert_stats",
    "bids",
    "funnel_history",
    "stocks",
    "cards",
    "prices",
    "acceptance_coefficients",
)

_NUMBERING = "wb_change_seq_migration"


def _cabinet_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["cabinet_id"],
        ["cabinets.id"],
        name=op.f(f"fk_{table}_cabinet_id_cabinets"),
        ondelete="CASCADE",
    )


def _create_tables() -> None:
    op.create_table(
        "wb_change_sequences",
        sa.Column("dataset", sa.String(length=100), nullable=False),
        sa.Column("last_seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("dataset", name=op.f("pk_wb_change_sequences")),
    )
    op.create_table(
        "wb_snapshot_runs",
        sa.Column("cabinet_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("dataset", sa.String(length=100), nullable=False),
        sa.Column("started_seq", sa.BigInteger(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        _cabinet_fk("wb_snapshot_runs"),
        sa.PrimaryKeyConstraint("cabinet_id", "dataset", name=op.f("pk_wb_snapshot_runs")),
    )
    op.create_table(
        "wb_snapshot_keys",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("cabinet_id", sa.Integer(), nullable=False),
        sa.Column("dataset", sa.String(length=100), nullable=False),
        sa.Column("digests", sa.LargeBinary(), nullable=False),
        _cabinet_fk("wb_snapshot_keys"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_wb_snapshot_keys")),
    )
    op.create_index(
        op.f("ix_wb_snapshot_keys_cabinet_id_dataset"),
        "wb_snapshot_keys",
        ["cabinet_id", "dataset"],
    )


def _quoted(table: str) -> str:
    # A plugin's dataset name is its own choice: quoted as SQLAlchemy quoted it at CREATE TABLE.
    return str(op.get_bind().dialect.identifier_preparer.quote(table))


def _convert_postgresql(table: str) -> None:
    # One ALTER, one rewrite: the volatile default numbers the rows as the table is copied
    # (in physical order: any order is a valid first numbering).
    op.execute(f"ALTER SEQUENCE {_NUMBERING} RESTART WITH 1")
    op.execute(
        f"ALTER TABLE {table} ALTER COLUMN data TYPE JSONB USING data::jsonb, "
        f"ADD COLUMN seq BIGINT NOT NULL DEFAULT nextval('{_NUMBERING}'), "
        "ADD COLUMN deleted_at TIMESTAMP WITH TIME ZONE"
    )
    op.execute(f"ALTER TABLE {table} ALTER COLUMN seq DROP DEFAULT")


def _convert_sqlite(table: str) -> None:
    op.execute(f"ALTER TABLE {table} ADD COLUMN seq BIGINT NOT NULL DEFAULT 0")
    op.execute(f"ALTER TABLE {table} ADD COLUMN deleted_at DATETIME")
    op.execute(f"UPDATE {table} SET seq = rowid")


def _datasets() -> list[tuple[str, str]]:
    """(dataset, table) of every dataset table: wbsync's, then those created for plugins."""
    declared = op.get_bind().execute(
        sa.text("SELECT dataset, table_name FROM wb_declared_datasets ORDER BY dataset")
    )
    return [(name, f"wb_{name}") for name in _BUILTIN] + [(d, t) for d, t in declared.fetchall()]


def upgrade() -> None:
    """Convert every dataset table; create the sequence and snapshot tables."""
    _create_tables()
    postgresql = op.get_bind().dialect.name == "postgresql"
    if postgresql:
        op.execute(f"CREATE TEMPORARY SEQUENCE {_NUMBERING}")
    for name, table in _datasets():
        quoted = _quoted(table)
        op.execute(f"ALTER TABLE {quoted} RENAME COLUMN updated_at TO changed_at")
        if postgresql:
            _convert_postgresql(quoted)
        else:
            _convert_sqlite(quoted)
        op.create_index(op.f(f"ix_{table}_seq"), table, ["seq"], unique=True)
        op.create_index(op.f(f"ix_{table}_cabinet_id_seq"), table, ["cabinet_id", "seq"])
        op.execute(
            sa.text(
                "INSERT INTO wb_change_sequences (dataset, last_seq) "
                f"SELECT :name, coalesce(max(seq), 0) FROM {quoted}"
            ).bindparams(name=name)
        )
    if postgresql:
        op.execute(f"DROP SEQUENCE {_NUMBERING}")


def downgrade() -> None:
    """Back to JSON rows with ``updated_at``; the feed's numbers and tombstones are dropped."""
    postgresql = op.get_bind().dialect.name == "postgresql"
    for _, table in _datasets():
        quoted = _quoted(table)
        # A fleet-wide dataset's table (made later, from its declaration) has no cabinet index.
        op.drop_index(op.f(f"ix_{table}_cabinet_id_seq"), table_name=table, if_exists=True)
        op.drop_index(op.f(f"ix_{table}_seq"), table_name=table)
        # Tombstoned rows were deleted at WB: the old schema cannot tell, so they go.
        op.execute(f"DELETE FROM {quoted} WHERE deleted_at IS NOT NULL")
        op.execute(f"ALTER TABLE {quoted} DROP COLUMN deleted_at")
        op.execute(f"ALTER TABLE {quoted} DROP COLUMN seq")
        if postgresql:
            op.execute(f"ALTER TABLE {quoted} ALTER COLUMN data TYPE JSON USING data::json")
        op.execute(f"ALTER TABLE {quoted} RENAME COLUMN changed_at TO updated_at")
    op.drop_index(op.f("ix_wb_snapshot_keys_cabinet_id_dataset"), table_name="wb_snapshot_keys")
    op.drop_table("wb_snapshot_keys")
    op.drop_table("wb_snapshot_runs")
    op.drop_table("wb_change_sequences")
