"""The last successful run and the last failure of each (cabinet, sync).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create ``sync_runs``."""
    op.create_table(
        "sync_runs",
        sa.Column("cabinet_id", sa.Integer(), nullable=False),
        sa.Column("sync", sa.String(length=100), nullable=False),
        sa.Column("success_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("success_pages", sa.Integer(), nullable=True),
        sa.Column("success_rows", sa.Integer(), nullable=True),
        sa.Column("failure_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("failure_reason", sa.Text(), nullable=True),
        sa.Column("failure_attempts", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["cabinet_id"],
            ["cabinets.id"],
            name=op.f("fk_sync_runs_cabinet_id_cabinets"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("cabinet_id", "sync", name=op.f("pk_sync_runs")),
    )


def downgrade() -> None:
    """Drop ``sync_runs``."""
    op.drop_table("sync_runs")
