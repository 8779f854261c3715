"""Every way PostgreSQL says "not now" is ``StoreUnavailableError`` (an infrastructure failure that
costs a job nothing), through a real connection; a refused statement stays a plain ``StoreError``.

The refusals the machine's server can make on demand are made there, on a throwaway database
(ALLOW_CONNECTIONS false, a role's CONNECTION LIMIT, pg_terminate_backend). Those only a server
starting, stopping or crashing sends (57P0x) come from a listener that speaks PostgreSQL's wire
protocol exactly as far as a server refusing a connection does: asyncpg and SQLAlchemy meet
the very bytes such a server sends.
"""

from __future__ import annotations

import asyncio
import secrets
import struct
from typing import Any

import pytest
from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import make_url

from tests.support.databases import DatabaseFactory
from tests.support.waiting import wait_for
from wbsync.errors import StoreError, StoreUnavailableError
from wbsync.store import db as db_module
from wbsync.store.db import Database

# The codes of the wire protocol's first messages that are requests, not a startup message.
_SSL_REQUEST, _GSSENC_REQUEST = 80877103, 80877104


class _RefusingServer:
    """Answers every connection's startup message with PostgreSQL's FATAL ErrorResponse."""

    def __init__(self, sqlstate: str, message: str) -> None:
        self._fields = b"".join(
            kind + value.encode() + b"\0"
            for kind, value in ((b"S", "FATAL"), (b"V", "FATAL"), (b"C", sqlstate), (b"M", message))
        )
        self._server: asyncio.Server | None = None
        self.port = 0

    async def __aenter__(self) -> _RefusingServer:
        self._server = await asyncio.start_server(self._refuse, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _refuse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                length, code = struct.unpack("!ii", await reader.readexactly(8))
                if code in (_SSL_REQUEST, _GSSENC_REQUEST):
                    writer.write(b"N")  # no encryption: go on in plain text
                    continue
                await reader.readexactly(length - 8)  # the rest of the startup message
                body = self._fields + b"\0"
                writer.write(b"E" + struct.pack("!i", len(body) + 4) + body)
                await writer.drain()
                return
        except (asyncio.IncompleteReadError, OSError):
            pass
        finally:
            writer.close()


@pytest.mark.parametrize(
    ("sqlstate", "message"),
    [
        ("57P03", "the database system is starting up"),
        ("57P03", "the database system is shutting down"),
        ("57P01", "terminating connection due to administrator command"),
        ("57P02", "terminating connection because of crash of another server process"),
        ("57P05", "terminating connection due to idle-session timeout"),
        ("53300", "sorry, too many clients already"),
        ("08006", "connection failure"),
        ("55000", 'database "wbsync" is not currently accepting connections'),
    ],
)
async def test_a_server_that_says_not_now_makes_the_store_unavailable(
    sqlstate: str, message: str
) -> None:
    async with _RefusingServer(sqlstate, message) as server:
        database = Database(f"postgresql+asyncpg://wbsync@127.0.0.1:{server.port}/wbsync")
        with pytest.raises(StoreUnavailableError, match=message):
            await database.start()
        await database.aclose()


@pytest.mark.parametrize(
    ("sqlstate", "message"),
    [
        ("28P01", 'password authentication failed for user "wbsync"'),
        ("3D000", 'database "wbsync" does not exist'),
    ],
)
async def test_a_server_that_refuses_for_good_is_a_store_error_not_unavailable(
    sqlstate: str, message: str
) -> None:
    async with _RefusingServer(sqlstate, message) as server:
        database = Database(f"postgresql+asyncpg://wbsync@127.0.0.1:{server.port}/wbsync")
        with pytest.raises(StoreError, match=message) as caught:
            await database.start()
        assert not isinstance(caught.value, StoreUnavailableError)
        await database.aclose()


async def test_a_database_not_accepting_connections_is_unavailable(
    throwaway: str, database_factory: DatabaseFactory
) -> None:
    async with Database(throwaway) as database:
        await database_factory.lock_out(throwaway)
        # The pooled connection is gone: its first statement fails (checkouts are not pinged),
        # which discards the pool's connections; a new one is refused with 55000.
        with pytest.raises(StoreUnavailableError, match=r"closed|administrator command"):
            await database.execute(text("SELECT 1"))
        with pytest.raises(StoreUnavailableError, match="not currently accepting connections"):
            async with database.connection() as conn:
                await conn.execute(text("SELECT 1"))
        # A statement straight through the driver meets the same refusal at its checkout.
        with pytest.raises(StoreUnavailableError, match="not currently accepting connections"):
            await database.fetch(text("SELECT 1"))
        # The probe's connection is pinged: it says why at once.
        with pytest.raises(StoreUnavailableError, match="not currently accepting connections"):
            await database.ping()


@pytest.mark.parametrize("way", ["transaction", "connection", "execute", "fetch"])
async def test_a_dead_pooled_connection_costs_one_unavailable_call_then_the_pool_recovers(
    throwaway: str, database_factory: DatabaseFactory, way: str
) -> None:
    async with Database(throwaway) as database:
        await database.execute(text("SELECT 1"))  # a connection in the pool
        await database_factory.terminate(throwaway)

        async def once() -> object:
            if way == "execute":
                return (await database.execute(text("SELECT 1"))).scalar()
            if way == "fetch":  # straight through the driver, on the pool's connection
                return (await database.fetch(text("SELECT 1 AS one")))[0]["one"]
            opened = database.transaction() if way == "transaction" else database.connection()
            async with opened as conn:
                return await conn.scalar(text("SELECT 1"))

        with pytest.raises(StoreUnavailableError, match=r"closed|administrator command"):
            await once()
        assert await once() == 1


async def test_a_connection_terminated_mid_statement_is_unavailable(
    throwaway: str, database_factory: DatabaseFactory
) -> None:
    async with Database(throwaway) as database:
        with pytest.raises(StoreUnavailableError, match=r"administrator command|closed"):
            async with database.connection() as conn:
                sleeping = asyncio.ensure_future(conn.execute(text("SELECT pg_sleep(30)")))
                await _terminated_mid_statement(database_factory, throwaway, sleeping)


async def test_a_connection_terminated_under_a_fetch_is_unavailable_and_left_out_of_the_pool(
    throwaway: str, database_factory: DatabaseFactory
) -> None:
    async with Database(throwaway) as database:
        first = await _backend(database)
        sleeping = asyncio.ensure_future(database.fetch(text("SELECT pg_sleep(30)")))
        with pytest.raises(StoreUnavailableError, match=r"administrator command|closed"):
            await _terminated_mid_statement(database_factory, throwaway, sleeping)
        assert await _backend(database) != first  # a new connection, at once


async def test_a_cancelled_fetch_closes_its_connection_and_the_pool_serves_the_next(
    throwaway: str,
) -> None:
    async with Database(throwaway) as database:
        sleeping = asyncio.ensure_future(database.fetch(text("SELECT pg_sleep(30)")))
        sleepers: list[int] = []

        async def started() -> bool:
            sleepers[:] = await _sleepers(database)
            return bool(sleepers)

        await wait_for(started)  # the statement runs on the server
        sleeping.cancel()
        with pytest.raises(asyncio.CancelledError):
            await sleeping
        # The connection a cancel cut short (its state unknown) is closed, not handed out
        # again: the pool's next statements run on its other connection and on a new one.
        backends = {await _backend(database) for _ in range(3)}
        assert sleepers[0] not in backends and len(backends) == 2


async def test_a_statement_refused_under_a_fetch_keeps_its_connection(throwaway: str) -> None:
    async with Database(throwaway) as database:
        first = await _backend(database)
        with pytest.raises(StoreError, match="does not exist") as caught:
            await database.fetch(text("SELECT * FROM no_such_table"))
        assert not isinstance(caught.value, StoreUnavailableError)
        assert await _backend(database) == first


async def test_a_value_its_type_cannot_store_is_refused_before_the_fetch(throwaway: str) -> None:
    async with Database(throwaway) as database:
        statement = text("SELECT CAST(:doc AS jsonb) AS doc").bindparams(
            bindparam("doc", type_=JSONB())
        )
        assert (await database.fetch(statement, {"doc": {"a": [1]}}))[0]["doc"] == {"a": [1]}
        with pytest.raises(StoreError, match="not JSON serializable") as caught:
            await database.fetch(statement, {"doc": {"a": object()}})
        assert not isinstance(caught.value, StoreUnavailableError)


async def _backend(database: Database) -> int:
    """The backend serving the pool's next (driver) statement."""
    return int((await database.fetch(text("SELECT pg_backend_pid() AS pid")))[0]["pid"])


async def _sleepers(database: Database) -> list[int]:
    """The backends running a ``pg_sleep`` on the database (asked on another connection)."""
    rows = await database.execute(
        text(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND state = 'active' AND query LIKE 'SELECT pg_sleep%'"
        )
    )
    return [int(pid) for pid in rows.scalars()]


async def _terminated_mid_statement(
    database_factory: DatabaseFactory, url: str, sleeping: asyncio.Future[Any]
) -> None:
    """Terminate the backend running ``sleeping``'s ``pg_sleep`` once it runs; await it."""
    name = make_url(url).database

    async def terminated() -> bool:
        await database_factory.admin(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE datname = '{name}' AND query LIKE 'SELECT pg_sleep%'"
        )
        return sleeping.done()

    await wait_for(terminated)  # until the statement has started and been cut
    await sleeping


async def test_too_many_connections_is_unavailable(
    throwaway: str, database_factory: DatabaseFactory
) -> None:
    role = f"wbsync_test_{secrets.token_hex(4)}"
    await database_factory.admin(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT 0")
    try:
        url = make_url(throwaway).set(username=role, password=None)
        database = Database(url.render_as_string(hide_password=False))
        with pytest.raises(StoreUnavailableError, match="too many connections"):
            await database.start()
        await database.aclose()
    finally:
        await database_factory.admin(f"DROP ROLE {role}")


async def test_a_refused_statement_on_a_live_database_is_not_unavailable(throwaway: str) -> None:
    async with Database(throwaway) as database:
        with pytest.raises(StoreError, match="does not exist") as caught:
            async with database.connection() as conn:
                await conn.execute(text("SELECT * FROM no_such_table"))
        assert not isinstance(caught.value, StoreUnavailableError)


async def test_a_pooled_connection_is_replaced_past_the_recycle_age(
    throwaway: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def backends(database: Database) -> set[int]:
        pids = set()
        for _ in range(3):  # one checkout after the other: the pool hands back its connection
            pids.add(int((await database.execute(text("SELECT pg_backend_pid()"))).scalar_one()))
        return pids

    async with Database(throwaway) as database:
        assert len(await backends(database)) == 1  # well within POOL_RECYCLE_S
    monkeypatch.setattr(db_module, "POOL_RECYCLE_S", 0)  # every connection is past its age
    async with Database(throwaway) as database:
        assert len(await backends(database)) == 3
