"""The command line: cabinets add/list/deactivate/remove, clear errors, tokens never printed."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from typer.testing import CliRunner

from wbsync.cli import app
from wbsync.config import get_settings
from wbsync.redis import keys
from wbsync.store import Database, Store
from wbsync.wb.tokens import Category, mint_token

SELLER = "5b0e2c1d-7a3f-4e6b-9d8c-0f1e2d3c4b5a"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("WBSYNC_DATABASE_URL", f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}")
    monkeypatch.setenv("WBSYNC_SECRET_KEY", "cli-test-secret")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def token() -> str:
    return mint_token(key="k" * 32, seller_id=SELLER, categories=[Category.FINANCE])


def test_cabinets_add_list_deactivate_remove(env: None) -> None:
    runner = CliRunner()
    raw = token()
    added = runner.invoke(app, ["cabinets", "add", "shop"], input=raw + "\n")
    assert added.exit_code == 0, added.output
    assert f"seller {SELLER}" in added.output and raw not in added.output

    listed = runner.invoke(app, ["cabinets", "list"])
    assert listed.exit_code == 0 and "shop" in listed.output and raw not in listed.output

    assert runner.invoke(app, ["cabinets", "deactivate", "shop"]).exit_code == 0
    assert "no" in runner.invoke(app, ["cabinets", "list"]).output
    assert runner.invoke(app, ["cabinets", "remove", "shop"]).exit_code == 0
    assert "shop" not in runner.invoke(app, ["cabinets", "list"]).output


def test_a_malformed_token_is_refused_without_echoing_it(env: None) -> None:
    reply = CliRunner().invoke(app, ["cabinets", "add", "shop", "--token", "not-a-jwt-secret"])
    assert reply.exit_code == 1
    assert "cabinet 'shop'" in reply.output and "not-a-jwt-secret" not in reply.output


def test_adding_without_a_secret_key_says_what_to_set(
    env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WBSYNC_SECRET_KEY")
    get_settings.cache_clear()
    reply = CliRunner().invoke(app, ["cabinets", "add", "shop", "--token", token()])
    assert reply.exit_code == 2 and "WBSYNC_SECRET_KEY" in reply.output


def test_removing_an_unknown_cabinet_is_a_clear_error(env: None) -> None:
    reply = CliRunner().invoke(app, ["cabinets", "remove", "nope"])
    assert reply.exit_code == 1 and "nope" in reply.output


async def test_removing_tombstones_the_rows_and_tells_the_change_stream(
    env: None, tmp_path: Path, redis_url: str, prefix: str, redis: Redis
) -> None:
    async with Database(f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}") as db:
        await db.migrate()
        store = Store(db, secret_key="cli-test-secret")
        cabinet = (await store.cabinets.add("shop", token(), SELLER)).id
        await store.upsert("orders", cabinet, [{"srid": f"o{i}"} for i in range(3)])
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WBSYNC_REDIS_URL", redis_url)
        patch.setenv("WBSYNC_REDIS_PREFIX", prefix)
        get_settings.cache_clear()
        done = await asyncio.to_thread(CliRunner().invoke, app, ["cabinets", "remove", "shop"])
    get_settings.cache_clear()
    assert done.exit_code == 0, done.output
    assert "its rows are tombstoned" in done.output
    entries: Any = await redis.xrange(keys.change_stream_key(prefix))
    assert [(f["dataset"], f["rows"]) for _id, f in entries] == [("orders", "3")]


# Modules that building the command tree and printing its help must not load: each costs tens
# to hundreds of milliseconds, and ``wbsync --help`` should answer at once.
HEAVY_MODULES = (
    "sqlalchemy",
    "alembic",
    "fastapi",
    "starlette",
    "uvicorn",
    "bullmq",
    "redis",
    "httpx",
    "aiohttp",
    "pydantic_settings",
    "jinja2",
    "prometheus_client",
    "matplotlib",
    "limits",
    "pyrate_limiter",
    "wbsync.config",
    "wbsync.store",
    "wbsync.emulator.app",
    "wbsync_bench.common",
)

# The added commands (wbsync.commands: the benchmarks, when installed) are in the tree too; a
# stand-in (not installed) answers its help with how to install it, exit 2.
_IMPORT_AND_HELP = """
import json, sys
import wbsync.cli
imported = sorted(sys.modules)
from importlib.metadata import entry_points
from typer.testing import CliRunner
added = {ep.name: ep.module for ep in entry_points(group="wbsync.commands")}
for words in ([], ["cabinets"], ["limits"], ["secrets"], ["emulator"], ["bench"], ["settings"]):
    reply = CliRunner().invoke(wbsync.cli.app, [*words, "--help"])
    stand_in = words == ["bench"] and "bench" not in added
    assert reply.exit_code == (2 if stand_in else 0), (words, reply.output)
print(json.dumps({"imported": imported, "helped": sorted(sys.modules), "added": added}))
"""


def test_the_command_tree_and_its_help_load_no_heavy_module() -> None:
    """A fresh interpreter (this one has loaded everything): import the CLI, print every help.

    pydantic is heavy too, but typer's own option parsing imports it for any command line, so
    only the import of the CLI module is held to it.
    """
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_AND_HELP], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout)
    assert {"wbsync.emulator.cli", *loaded["added"].values()} <= set(loaded["imported"])
    assert [m for m in (*HEAVY_MODULES, "pydantic") if m in loaded["imported"]] == []
    assert [m for m in HEAVY_MODULES if m in loaded["helped"]] == []
