"""The secret key is verified at start: a missing or wrong key stops every command in one line;
``wbsync secrets rotate`` re-encrypts every token in one transaction."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr
from sqlalchemy import delete
from typer.testing import CliRunner

from wbsync.cli import app
from wbsync.config import Settings, get_settings
from wbsync.emulator import EmulatorConfig, SellerSizes, running_emulator
from wbsync.errors import ConfigError
from wbsync.shared.runtime import Runtime
from wbsync.store import Database, Store
from wbsync.store.schema import key_checks
from wbsync.system import clock
from wbsync.wb import methods

OLD, NEW, WRONG = "the-old-secret-key", "the-new-secret-key", "not-the-right-key"
SELLER = "00000001-0000-4000-8000-0000000000a0"


async def test_the_first_token_binds_the_key_and_others_are_refused(database: Database) -> None:
    old = Store(database, secret_key=OLD)
    await old.cabinets.verify_key()  # nothing stored: any key will do
    await Store(database, secret_key=None).cabinets.verify_key()
    await old.cabinets.add("shop", "token-1", "sid")

    await old.cabinets.verify_key()
    with pytest.raises(ConfigError, match=r"^WBSYNC_SECRET_KEY: not the key") as wrong:
        await Store(database, secret_key=WRONG).cabinets.verify_key()
    assert WRONG not in str(wrong.value) and OLD not in str(wrong.value)
    with pytest.raises(ConfigError, match=r"^WBSYNC_SECRET_KEY: not set, .* 1 cabinet"):
        await Store(database, secret_key=None).cabinets.verify_key()
    with pytest.raises(ConfigError, match="not the key"):  # no token stored under a wrong key
        await Store(database, secret_key=WRONG).cabinets.add("other", "token-2", "sid")
    assert [c.name for c in await old.cabinets.list()] == ["shop"]

    await old.cabinets.remove("shop")  # nothing stored again: a new key may start afresh
    await Store(database, secret_key=WRONG).cabinets.add("other", "token-2", "sid")
    with pytest.raises(ConfigError, match="not the key"):
        await old.cabinets.verify_key()


async def test_tokens_stored_before_the_check_decide_it(database: Database) -> None:
    old = Store(database, secret_key=OLD)
    await old.cabinets.add("shop", "token-1", "sid")
    async with database.transaction() as conn:  # a database from before the key check
        await conn.execute(delete(key_checks))
    with pytest.raises(ConfigError, match="not the key"):
        await Store(database, secret_key=WRONG).cabinets.verify_key()
    await old.cabinets.verify_key()  # writes the check row
    async with database.transaction() as conn:
        await conn.execute(delete(key_checks))  # gone again...
    await old.cabinets.verify_key()
    with pytest.raises(ConfigError, match="not the key"):  # ...and back, now from the check
        await Store(database, secret_key=WRONG).cabinets.verify_key()


async def test_rotate_reencrypts_every_token_in_one_go(database: Database) -> None:
    old = Store(database, secret_key=OLD)
    for i in range(3):
        await old.cabinets.add(f"shop-{i}", f"token-{i}", "sid")
    with pytest.raises(ConfigError, match="not the key"):
        await Store(database, secret_key=WRONG).cabinets.rotate_key(NEW)
    assert await old.cabinets.rotate_key(NEW) == 3

    new = Store(database, secret_key=NEW)
    await new.cabinets.verify_key()
    assert [c.token() for c in await new.cabinets.list()] == ["token-0", "token-1", "token-2"]
    with pytest.raises(ConfigError, match="not the key"):
        await old.cabinets.verify_key()


@pytest.fixture
def cli_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, redis_url: str) -> Iterator[str]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'keys.db'}"
    monkeypatch.setenv("WBSYNC_DATABASE_URL", url)
    monkeypatch.setenv("WBSYNC_REDIS_URL", redis_url)
    monkeypatch.setenv("WBSYNC_API_KEYS", json.dumps(["a" * 40]))
    monkeypatch.setenv("WBSYNC_LOG_LEVEL", "WARNING")
    get_settings.cache_clear()
    yield url
    get_settings.cache_clear()


def _with_key(monkeypatch: pytest.MonkeyPatch, key: str | None) -> None:
    if key is None:
        monkeypatch.delenv("WBSYNC_SECRET_KEY", raising=False)
    else:
        monkeypatch.setenv("WBSYNC_SECRET_KEY", key)
    get_settings.cache_clear()


def _emulator() -> EmulatorConfig:
    # The default signing key: a token minted by one emulator is good at the next.
    return EmulatorConfig(
        time_scale=0.01,
        anchor_date=clock.wb_today(),
        sizes=SellerSizes(products=5),
        serve_disabled_in_docs=True,  # it reads acceptance coefficients
    )


async def _store_a_cabinet(url: str) -> None:
    async with running_emulator(_emulator()) as emu, Database(url) as db:
        await db.migrate()
        await Store(db, secret_key=OLD).cabinets.add("shop", emu.token(SELLER), SELLER)


async def _read_wb_with(url: str, redis_url: str, prefix: str) -> None:
    async with running_emulator(_emulator()) as emu:
        settings = Settings(
            database_url=url,
            redis_url=redis_url,
            redis_prefix=prefix,
            secret_key=SecretStr(NEW),
            wb_base_url=emu.base_url,
            time_scale=0.01,
        )
        runtime = await Runtime(settings, redis_url=redis_url).start()
        try:  # the re-encrypted token reaches WB (the emulator) and is accepted
            cabinet = await runtime.store.cabinets.get("shop")
            rows = await methods.acceptance_coefficients(runtime.client(cabinet))
            assert isinstance(rows, list) and emu.counters.total("requests") == 1
        finally:
            await runtime.aclose()


def test_every_command_refuses_a_wrong_key_and_rotate_fixes_it(
    cli_env: str, monkeypatch: pytest.MonkeyPatch, redis_url: str, prefix: str
) -> None:
    asyncio.run(_store_a_cabinet(cli_env))
    runner = CliRunner()
    commands = [["run"], ["api"], ["cabinets", "list"], ["cabinets", "remove", "shop"]]
    for key, said in ((WRONG, "not the key"), (None, "not set")):
        _with_key(monkeypatch, key)
        for command in commands:
            result = runner.invoke(app, command)
            assert result.exit_code == 2, (command, result.output)
            assert result.output.startswith(f"error: WBSYNC_SECRET_KEY: {said}"), result.output
            assert result.output.count("\n") == 1, (command, result.output)

    _with_key(monkeypatch, OLD)
    rotated = runner.invoke(app, ["secrets", "rotate"], input=NEW + "\n")
    assert rotated.exit_code == 0, rotated.output
    assert "re-encrypted 1 token(s)" in rotated.output and NEW not in rotated.output
    assert runner.invoke(app, ["cabinets", "list"]).exit_code == 2  # the old key is wrong now

    _with_key(monkeypatch, NEW)
    listed = runner.invoke(app, ["cabinets", "list"])
    assert listed.exit_code == 0 and "shop" in listed.output
    asyncio.run(_read_wb_with(cli_env, redis_url, prefix))


def test_rotate_refuses_an_empty_or_unchanged_key(
    cli_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _with_key(monkeypatch, OLD)
    for given in ("\n", OLD + "\n"):
        result = CliRunner().invoke(app, ["secrets", "rotate"], input=given)
        assert result.exit_code == 2 and result.output.startswith("error: ")
