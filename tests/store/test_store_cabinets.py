"""Cabinets: CRUD, and the token stays encrypted at rest and out of reprs, errors and logs."""

from __future__ import annotations

import logging

import pytest
from sqlalchemy import select

from tests.support.databases import TEST_SECRET_KEY, DatabaseFactory
from wbsync.errors import CabinetNotFoundError, ConfigError, StoreError
from wbsync.store import Database, Store
from wbsync.store.crypto import TokenCipher
from wbsync.store.schema import CABINET_ID_MAX, cabinets

TOKEN = "eyJhbGciOiJFUzI1NiJ9.eyJzaWQiOiJzZWxsZXIifQ.c2lnbmF0dXJlLXNlY3JldC12YWx1ZQ"


async def test_add_get_list_deactivate_remove(store: Store) -> None:
    shop = await store.cabinets.add("shop", TOKEN, "sid-1")
    other = await store.cabinets.add("other", "other-token", "sid-2")

    assert shop.active and shop.seller_id == "sid-1"
    assert shop.created_at.tzinfo is not None
    assert await store.cabinets.get("shop") == shop
    assert await store.cabinets.get(shop.id) == shop
    assert [c.name for c in await store.cabinets.list()] == ["shop", "other"]

    inactive = await store.cabinets.deactivate("other")
    assert not inactive.active
    assert [c.name for c in await store.cabinets.list(active_only=True)] == ["shop"]
    assert (await store.cabinets.set_active(other.id, True)).active

    removed = await store.cabinets.remove("other")
    assert removed.removed_at is not None and not removed.active
    with pytest.raises(CabinetNotFoundError):
        await store.cabinets.get(other.id)
    assert [c.name for c in await store.cabinets.list()] == ["shop"]
    # Its record stays for its feed (by id, or the name it had) and a resumed removal.
    assert (await store.cabinets.get(other.id, removed=True)).id == other.id
    assert (await store.cabinets.get("other", removed=True)).id == other.id
    assert (await store.cabinets.remove("other")).removed_at == removed.removed_at
    # Its name is free again.
    assert (await store.cabinets.add("other", "new-token", "sid-2")).id != other.id
    with pytest.raises(CabinetNotFoundError):
        await store.cabinets.deactivate("ghost")


async def test_duplicate_name_is_refused_without_leaking_the_token(store: Store) -> None:
    await store.cabinets.add("shop", TOKEN, "sid")
    with pytest.raises(StoreError, match="already exists") as caught:
        await store.cabinets.add("shop", TOKEN, "sid")
    assert TOKEN not in str(caught.value)


async def test_token_is_encrypted_at_rest_and_revealed_on_demand(
    store: Store, database: Database
) -> None:
    cabinet = await store.cabinets.add("shop", TOKEN, "sid")
    async with database.connection() as conn:
        stored = (await conn.execute(select(cabinets))).one()
    assert all(TOKEN not in str(value) for value in stored)
    assert TOKEN[:20] not in stored.token_encrypted

    assert cabinet.token() == TOKEN
    assert (await store.cabinets.get("shop")).token() == TOKEN


async def test_wrong_key_gives_a_clear_error(store: Store, database: Database) -> None:
    await store.cabinets.add("shop", TOKEN, "sid")
    other = Store(database, secret_key="some other key")
    cabinet = await other.cabinets.get("shop")
    with pytest.raises(ConfigError, match="WBSYNC_SECRET_KEY differs") as caught:
        cabinet.token()
    assert TOKEN not in str(caught.value)


async def test_missing_key_gives_a_clear_error_but_listing_works(
    store: Store, database: Database
) -> None:
    await store.cabinets.add("shop", TOKEN, "sid")
    keyless = Store(database, secret_key=None)
    [cabinet] = await keyless.cabinets.list()
    with pytest.raises(ConfigError, match="set WBSYNC_SECRET_KEY"):
        cabinet.token()
    with pytest.raises(ConfigError, match="set WBSYNC_SECRET_KEY"):
        await keyless.cabinets.add("new", TOKEN, "sid")


async def test_repr_and_str_hide_the_token(store: Store) -> None:
    cabinet = await store.cabinets.add("shop", TOKEN, "sid")
    for text in (repr(cabinet), str(cabinet), repr(store), repr(store.database)):
        assert TOKEN not in text
        assert "_sealed" not in text
    assert "shop" in repr(cabinet)


async def test_logs_never_contain_the_token(
    database: Database,
    database_factory: DatabaseFactory,
    db_backend: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A second engine on the same (emptied) database, with SQL echo on: the noisiest logging.
    url = await database_factory.migrated_url(db_backend)
    with caplog.at_level(logging.DEBUG):
        async with Database(url, echo=True) as echoing:
            store = Store(echoing, secret_key=TEST_SECRET_KEY)
            cabinet = await store.cabinets.add("shop", TOKEN, "sid")
            await store.cabinets.get("shop")
            assert cabinet.token() == TOKEN
            with pytest.raises(StoreError):
                await store.cabinets.add("shop", TOKEN, "sid")
    assert "INSERT INTO cabinets" in caplog.text, "SQL echo should have logged statements"
    for record in caplog.records:
        assert TOKEN not in record.getMessage()
        assert TOKEN not in str(record.args)


def test_a_cipher_decrypts_a_ciphertext_once_and_keeps_a_bounded_number() -> None:
    cipher = TokenCipher(TEST_SECRET_KEY, opened_max=2)
    sealed = [cipher.encrypt(f"token-{i}") for i in range(3)]
    assert [cipher.decrypt(s) for s in sealed] == ["token-0", "token-1", "token-2"]
    assert cipher.opened == 2  # the bound: the oldest went
    assert cipher.decrypt(sealed[0]) == "token-0"  # decrypted again, correctly
    assert "token" not in repr(cipher)
    with pytest.raises(ConfigError, match="WBSYNC_SECRET_KEY differs"):
        TokenCipher("another key").decrypt(sealed[0])
    with pytest.raises(ValueError, match="opened_max"):
        TokenCipher(TEST_SECRET_KEY, opened_max=0)


async def test_a_cabinet_and_its_cursor_in_one_read(store: Store) -> None:
    shop = await store.cabinets.add("shop", TOKEN, "sid")
    assert await store.cabinets.with_cursor(shop.id, "rnp-finance-sync") == (shop, None)
    await store.cursors.save(shop.id, "rnp-finance-sync", {"rrdId": 7})
    await store.cursors.save(shop.id, "other-sync", {"rrdId": 8})
    cabinet, cursor = await store.cabinets.with_cursor(shop.id, "rnp-finance-sync")
    assert cabinet == shop and cursor == {"rrdId": 7}
    await store.cabinets.deactivate(shop.id)
    cabinet, cursor = await store.cabinets.with_cursor(shop.id, "rnp-finance-sync")
    assert not cabinet.active and cursor == {"rrdId": 7} and cabinet.token() == TOKEN
    other = await store.cabinets.add("other", TOKEN, "sid2")
    await store.cursors.save(other.id, "rnp-finance-sync", {"rrdId": 9})
    assert (await store.cabinets.with_cursor(other.id, "rnp-finance-sync"))[1] == {"rrdId": 9}
    assert (await store.cabinets.with_cursor(shop.id, "rnp-finance-sync"))[1] == {"rrdId": 7}
    # Ids no cabinet can have (PostgreSQL would refuse one past its integer) find none.
    for missing in (shop.id + 1000, 0, -1, CABINET_ID_MAX + 1):
        with pytest.raises(CabinetNotFoundError):
            await store.cabinets.with_cursor(missing, "rnp-finance-sync")
