"""The bids' last write error: what WB said when it refused the autobidder's last write of a bid.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-06

``wb_bids`` gains ``last_write_error`` (text, nullable): WB's words for the item when its reply to
the bids method refused it, NULL when the last write went through or none was sent. Adding a
nullable column without a default changes no row on either backend: the migration is instant.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add ``wb_bids.last_write_error``."""
    op.add_column("wb_bids", sa.Column("last_write_error", sa.Text(), nullable=True))


def downgrade() -> None:
    """Drop it (SQLite 3.35 and later drop a column in place)."""
    op.drop_column("wb_bids", "last_write_error")
