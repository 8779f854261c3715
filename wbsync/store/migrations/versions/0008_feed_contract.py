"""The change feed as a contract: operations, one order, a low-water mark, removed cabinets.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-06

Every dataset table (wbsync's own, and the standard tables of plugins' datasets recorded in
``wb_declared_datasets``) gains ``inserted_seq`` (the ``seq`` of the row's first live write since
it was inserted or came back from a tombstone: the feed's ``op`` is ``insert`` when it equals
``seq``). ``wb_change_sequences`` gains ``low_seq`` (the feed's low-water mark: pruned tombstones
raise it) and ``last_changed_at`` (the last ``changed_at`` given out, so stamps never run
backwards along ``seq``). ``cabinets`` gains ``removed_at`` (a removed cabinet's record stays
until its tombstones are pruned). Nullable columns and a column with a constant default: no row
is rewritten on either backend, the migration is instant. Rows written before it have no
``inserted_seq`` and read as ``update``.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
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


def _tables() -> list[str]:
    """Every dataset table: wbsync's, then those created for plugins."""
    declared = op.get_bind().execute(
        sa.text("SELECT table_name FROM wb_declared_datasets ORDER BY dataset")
    )
    return [f"wb_{name}" for name in _BUILTIN] + [t for (t,) in declared.fetchall()]


def upgrade() -> None:
    """Add the columns."""
    for table in _tables():
        op.add_column(table, sa.Column("inserted_seq", sa.BigInteger(), nullable=True))
    op.add_column(
        "wb_change_sequences",
        sa.Column("low_seq", sa.BigInteger(), nullable=False, server_default=sa.text("0")),
    )
    op.add_column(
        "wb_change_sequences",
        sa.Column("last_changed_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.add_column("cabinets", sa.Column("removed_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    """Drop them (SQLite 3.35 and later drop a column in place); removed cabinets go at once."""
    op.execute("DELETE FROM cabinets WHERE removed_at IS NOT NULL")
    op.drop_column("cabinets", "removed_at")
    op.drop_column("wb_change_sequences", "last_changed_at")
    op.drop_column("wb_change_sequences", "low_seq")
    for table in _tables():
        op.drop_column(table, "inserted_seq")
