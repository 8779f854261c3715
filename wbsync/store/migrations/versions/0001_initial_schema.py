"""Initial schema: cabinets, sync cursors, one table per synced WB dataset, send logs.

Revision ID: 0001
Revises:
Create Date: 2026-12-02

Written out in full rather than built from the dataset registry: a revision is history, and a
later change to the registry must not change what this revision created.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_STR = sa.String(length=255)
_DATE = sa.String(length=10)

# Dataset table -> (natural key columns, comment naming WB's method).
_DATASETS: dict[str, tuple[list[tuple[str, sa.types.TypeEngine[Any]]], str]] = {
    "wb_finance_report": (
        [("rrd_id", sa.BigInteger())],
        "WB rows of POST /api/finance/v1/sales-reports/detailed",
    ),
    "wb_orders": ([("srid", _STR)], "WB rows of GET /api/v1/supplier/orders"),
    "wb_sales": ([("sale_id", _STR)], "WB rows of GET /api/v1/supplier/sales"),
    "wb_adverts": ([("advert_id", sa.BigInteger())], "WB rows of GET /api/advert/v2/adverts"),
    "wb_advert_stats": (
        [("advert_id", sa.BigInteger()), ("date", _DATE)],
        "WB rows of GET /adv/v3/fullstats (one row per campaign per day)",
    ),
    "wb_bids": (
        [("advert_id", sa.BigInteger()), ("nm_id", sa.BigInteger()), ("norm_query", _STR)],
        "WB rows of POST /adv/v0/normquery/get-bids",
    ),
    "wb_funnel_history": (
        [("nm_id", sa.BigInteger()), ("date", _DATE)],
        "WB rows of POST /api/analytics/v3/sales-funnel/products/history "
        "(one row per item per day)",
    ),
    "wb_stocks": (
        [
            ("nm_id", sa.BigInteger()),
            ("chrt_id", sa.BigInteger()),
            ("warehouse_id", sa.BigInteger()),
        ],
        "WB rows of POST /api/analytics/v1/stocks-report/wb-warehouses",
    ),
    "wb_cards": ([("nm_id", sa.BigInteger())], "WB rows of POST /content/v2/get/cards/list"),
    "wb_prices": ([("nm_id", sa.BigInteger())], "WB rows of GET /api/v2/list/goods/filter"),
    "wb_acceptance_coefficients": (
        [("warehouse_id", sa.BigInteger()), ("date", _DATE), ("box_type_id", sa.BigInteger())],
        "WB rows of GET /api/tariffs/v1/acceptance/coefficients",
    ),
}


def _timestamp(name: str) -> sa.Column[Any]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=False)


def _cabinet_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["cabinet_id"],
        ["cabinets.id"],
        name=op.f(f"fk_{table}_cabinet_id_cabinets"),
        ondelete="CASCADE",
    )


def _key_column(name: str, type_: sa.types.TypeEngine[Any]) -> sa.Column[Any]:
    return sa.Column(name, type_, autoincrement=False, nullable=False)


def _create_log_tables() -> None:
    op.create_table(
        "sent_bids",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("cabinet_id", sa.Integer(), nullable=False),
        sa.Column("advert_id", sa.BigInteger(), nullable=False),
        sa.Column("nm_id", sa.BigInteger(), nullable=False),
        sa.Column("norm_query", sa.Text(), nullable=True),
        sa.Column("old_bid", sa.BigInteger(), nullable=True),
        sa.Column("new_bid", sa.BigInteger(), nullable=False),
        _timestamp("sent_at"),
        _cabinet_fk("sent_bids"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sent_bids")),
    )
    op.create_index(op.f("ix_sent_bids_cabinet_id"), "sent_bids", ["cabinet_id"])
    op.create_table(
        "sent_price_uploads",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("cabinet_id", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.BigInteger(), nullable=True),
        sa.Column("items_count", sa.Integer(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        _timestamp("sent_at"),
        _cabinet_fk("sent_price_uploads"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sent_price_uploads")),
    )
    op.create_index(op.f("ix_sent_price_uploads_cabinet_id"), "sent_price_uploads", ["cabinet_id"])
    op.create_table(
        "price_targets",
        _key_column("cabinet_id", sa.Integer()),
        _key_column("nm_id", sa.BigInteger()),
        sa.Column("price", sa.BigInteger(), nullable=True),
        sa.Column("discount", sa.Integer(), nullable=True),
        _timestamp("updated_at"),
        _cabinet_fk("price_targets"),
        sa.PrimaryKeyConstraint("cabinet_id", "nm_id", name=op.f("pk_price_targets")),
    )


def upgrade() -> None:
    """Create every table."""
    op.create_table(
        "cabinets",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("token_encrypted", sa.Text(), nullable=False),
        sa.Column("seller_id", sa.String(length=64), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        _timestamp("created_at"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cabinets")),
        sa.UniqueConstraint("name", name=op.f("uq_cabinets_name")),
    )
    op.create_table(
        "wb_sync_cursors",
        _key_column("cabinet_id", sa.Integer()),
        sa.Column("sync", sa.String(length=100), nullable=False),
        sa.Column("cursor", sa.JSON(), nullable=False),
        _timestamp("updated_at"),
        _cabinet_fk("wb_sync_cursors"),
        sa.PrimaryKeyConstraint("cabinet_id", "sync", name=op.f("pk_wb_sync_cursors")),
    )
    for table, (keys, comment) in _DATASETS.items():
        op.create_table(
            table,
            _key_column("cabinet_id", sa.Integer()),
            *(_key_column(name, type_) for name, type_ in keys),
            sa.Column("data", sa.JSON(), nullable=False),
            _timestamp("updated_at"),
            _cabinet_fk(table),
            sa.PrimaryKeyConstraint(
                "cabinet_id", *(name for name, _ in keys), name=op.f(f"pk_{table}")
            ),
            comment=comment,
        )
    _create_log_tables()


def downgrade() -> None:
    """Drop every table, dependents first."""
    op.drop_index(op.f("ix_sent_price_uploads_cabinet_id"), table_name="sent_price_uploads")
    op.drop_index(op.f("ix_sent_bids_cabinet_id"), table_name="sent_bids")
    for table in ("price_targets", "sent_price_uploads", "sent_bids", *_DATASETS):
        op.drop_table(table)
    op.drop_table("wb_sync_cursors")
    op.drop_table("cabinets")
