"""The record of the standard tables created for datasets that plugins declare.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create ``wb_declared_datasets``."""
    op.create_table(
        "wb_declared_datasets",
        sa.Column("dataset", sa.String(length=100), nullable=False),
        sa.Column("table_name", sa.String(length=120), nullable=False),
        sa.Column("owner", sa.String(length=100), nullable=False),
        sa.Column("key", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("dataset", name=op.f("pk_wb_declared_datasets")),
    )


def downgrade() -> None:
    """Drop the recorded plugin dataset tables, then the record."""
    recorded = op.get_bind().execute(sa.text("SELECT table_name FROM wb_declared_datasets"))
    for (table_name,) in recorded.fetchall():
        op.drop_table(table_name)
    op.drop_table("wb_declared_datasets")
