"""Key check: one row holding a value encrypted with WBSYNC_SECRET_KEY, to verify the key at start.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-03

The row is written by the application (a migration has no key): with the first token stored, or
at the first start that reads an older database's tokens with the right key.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create the key_checks table."""
    op.create_table(
        "key_checks",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("sealed", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_key_checks")),
    )


def downgrade() -> None:
    """Drop the key_checks table."""
    op.drop_table("key_checks")
