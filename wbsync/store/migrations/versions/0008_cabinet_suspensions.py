"""Suspensions of what WB refuses for good, and each cabinet's token expiry.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-06

``cabinet_suspensions`` holds one row per suspended cabinet (``section`` "") or (cabinet,
section): the kind of refusal, WB's words, since when, and when the next probe may go.
``cabinets`` gains ``token_expires_at`` (nullable): the token's ``exp``, filled when a token is
stored; rows stored before this revision get it when their token is next decrypted (the
fan-out's first read after start, or a job's run). Adding a nullable column changes no row.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create ``cabinet_suspensions``; add ``cabinets.token_expires_at``."""
    op.add_column(
        "cabinets", sa.Column("token_expires_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.create_table(
        "cabinet_suspensions",
        sa.Column("cabinet_id", sa.Integer(), nullable=False),
        sa.Column("section", sa.String(length=100), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("words", sa.Text(), nullable=True),
        sa.Column("since", sa.DateTime(timezone=True), nullable=False),
        sa.Column("probe_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["cabinet_id"],
            ["cabinets.id"],
            name=op.f("fk_cabinet_suspensions_cabinet_id_cabinets"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("cabinet_id", "section", name=op.f("pk_cabinet_suspensions")),
    )


def downgrade() -> None:
    """Drop them."""
    op.drop_table("cabinet_suspensions")
    op.drop_column("cabinets", "token_expires_at")
