"""PostgreSQL compresses large values with lz4 where the server has it, its own default else."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from wbsync.store import Database, Store


async def test_large_rows_are_compressed_with_lz4_where_the_server_has_it(
    store: Store, database: Database
) -> None:
    if database.dialect != "postgresql":
        pytest.skip("SQLite compresses nothing")
    offered = (
        await database.execute(
            text("SELECT enumvals FROM pg_settings WHERE name = 'default_toast_compression'")
        )
    ).scalar()
    cabinet = (await store.cabinets.add("shop", "token-shop", "sid-shop")).id
    # Past the ~2 KB a row may take before PostgreSQL compresses it, and compressible.
    row = {"rrdId": 1, "nmId": 5, "title": "Платье летнее " * 400}
    assert await store.upsert("finance_report", cabinet, [row]) == 1
    method = (
        await database.execute(text("SELECT pg_column_compression(data) FROM wb_finance_report"))
    ).scalar()
    assert method == ("lz4" if offered and "lz4" in offered else "pglz")
    assert await store.fetch("finance_report", cabinet) == [row]
