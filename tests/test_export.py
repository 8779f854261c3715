"""``wbsync export``: the change feed as JSON lines or CSV, read in bounded keyset batches."""

from __future__ import annotations

import asyncio
import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from wbsync.cabinets.export import export_changes
from wbsync.cli import app
from wbsync.config import get_settings
from wbsync.store import Database, Store


async def test_export_reads_bounded_batches_and_writes_every_change_in_order(store: Store) -> None:
    first = (await store.cabinets.add("first", "t1", "s1")).id
    second = (await store.cabinets.add("second", "t2", "s2")).id
    for i in range(10):
        await store.upsert("orders", first if i < 7 else second, [{"srid": f"o{i}", "n": i}])

    out = io.StringIO()
    stats = await export_changes(store, "orders", out, batch=3)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["data"]["srid"] for line in lines] == [f"o{i}" for i in range(10)]
    assert [line["seq"] for line in lines] == sorted(line["seq"] for line in lines)
    # Memory holds one batch: ten changes came in four reads of at most three.
    assert (stats.rows, stats.pages, stats.largest_page) == (10, 4, 3)
    assert stats.last_seq == lines[-1]["seq"]

    out = io.StringIO()
    rest = await export_changes(
        store, "orders", out, cabinet_id=first, after=lines[2]["seq"], fmt="csv", batch=3
    )
    table = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert [r["srid"] for r in table] == ["o3", "o4", "o5", "o6"]
    assert list(table[0]) == ["seq", "cabinet_id", "srid", "deleted", "changed_at", "data", "op"]
    assert table[0]["op"] == "insert" and table[0]["changed_at"].endswith("Z")
    assert json.loads(table[0]["data"]) == {"srid": "o3", "n": 3}
    assert (rest.rows, rest.largest_page) == (4, 3)


@pytest.fixture
def cli_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'export.db'}"
    monkeypatch.setenv("WBSYNC_DATABASE_URL", url)
    monkeypatch.setenv("WBSYNC_SECRET_KEY", "export-test-secret")
    get_settings.cache_clear()
    yield url
    get_settings.cache_clear()


async def _seed(url: str) -> None:
    async with Database(url) as db:
        await db.migrate()
        store = Store(db, secret_key="export-test-secret")
        cabinet = (await store.cabinets.add("shop", "token", "sid")).id
        await store.upsert("stocks", cabinet, [{"nmId": 1, "chrtId": 2, "warehouseId": 3}])


def test_the_command_streams_to_stdout_and_refuses_bad_input(cli_db: str) -> None:
    asyncio.run(_seed(cli_db))
    runner = CliRunner()
    done = runner.invoke(app, ["export", "stocks", "--cabinet", "shop", "--format", "csv"])
    assert done.exit_code == 0, done.output
    assert (
        done.stdout.splitlines()[0]
        == "seq,cabinet_id,nm_id,chrt_id,warehouse_id,deleted,changed_at,data,op"
    )
    assert "1 changes; next --after 1" in done.stderr

    bad = runner.invoke(app, ["export", "stocks", "--format", "xml"])
    assert bad.exit_code == 2 and "--format must be jsonl or csv, got 'xml'" in bad.output
    unknown = runner.invoke(app, ["export", "nope"])
    assert unknown.exit_code == 1 and "unknown dataset 'nope'" in unknown.output
    future = runner.invoke(app, ["export", "stocks", "--after", "5"])
    assert future.exit_code == 1 and "beyond the end of the stocks feed (1)" in future.output
    token = runner.invoke(app, ["export", "stocks", "--after", "stocks:1"])
    assert token.exit_code == 0 and "0 changes; next --after stocks:1" in token.stderr
    other = runner.invoke(app, ["export", "stocks", "--after", "orders:0"])
    assert other.exit_code == 1 and "a cursor of the orders feed, not of stocks" in other.output
    empty = runner.invoke(app, ["export", "stocks", "--after", ""])
    assert empty.exit_code == 1 and "is empty" in empty.output
