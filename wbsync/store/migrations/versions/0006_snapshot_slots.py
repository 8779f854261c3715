"""Snapshot bookkeeping updated in place: a run row kept per (cabinet, dataset), key slots.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-04

``wb_snapshot_runs`` gains ``slots`` (the key slots the run in progress has filled) and ``active``
(a run is in progress): a finished run's row stays, inactive, instead of being deleted.
``wb_snapshot_keys`` is recreated keyed by (cabinet, dataset, slot), each row overwritten by the
next run; on PostgreSQL with fillfactor 50, so a page has room for the next version of its rows.
The keys of runs in progress are dropped with the old table, so those runs become inactive: their
next ``complete`` tombstones nothing, the run after them starts afresh (the safe direction).
Both tables hold one row per (cabinet, snapshot dataset) and slot: the migration is instant.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FILLFACTOR = 50


def _cabinet_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["cabinet_id"],
        ["cabinets.id"],
        name=op.f(f"fk_{table}_cabinet_id_cabinets"),
        ondelete="CASCADE",
    )


def upgrade() -> None:
    """Add the runs' slots and active flag; recreate the keys table by slot."""
    op.add_column(
        "wb_snapshot_runs",
        sa.Column("slots", sa.Integer(), nullable=False, server_default=sa.text("0")),
    )
    op.add_column(
        "wb_snapshot_runs",
        sa.Column("active", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.drop_index(op.f("ix_wb_snapshot_keys_cabinet_id_dataset"), table_name="wb_snapshot_keys")
    op.drop_table("wb_snapshot_keys")
    op.create_table(
        "wb_snapshot_keys",
        sa.Column("cabinet_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("dataset", sa.String(length=100), nullable=False),
        sa.Column("slot", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("digests", sa.LargeBinary(), nullable=False),
        _cabinet_fk("wb_snapshot_keys"),
        sa.PrimaryKeyConstraint("cabinet_id", "dataset", "slot", name=op.f("pk_wb_snapshot_keys")),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER TABLE wb_snapshot_keys SET (fillfactor = {_FILLFACTOR})")


def downgrade() -> None:
    """Back to a keys row per page and a run row only while a run is in progress."""
    op.drop_table("wb_snapshot_keys")
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
    # Every run loses its keys: none stays in progress.
    op.execute("DELETE FROM wb_snapshot_runs")
    op.execute("ALTER TABLE wb_snapshot_runs DROP COLUMN active")
    op.execute("ALTER TABLE wb_snapshot_runs DROP COLUMN slots")
