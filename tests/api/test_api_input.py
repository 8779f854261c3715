"""A client's mistakes are 422 or 404, never 5xx; no reply shows the database."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import httpx
import pytest

from tests.support.api import AUTH, SELLERS
from tests.support.databases import DatabaseFactory
from wbsync.api import create_app
from wbsync.emulator import Emulator
from wbsync.shared.runtime import Runtime
from wbsync.store import Cabinet
from wbsync.store.schema import CABINET_ID_MAX

AddCabinet = Callable[..., Awaitable[Cabinet]]
BAD_IDS = [CABINET_ID_MAX + 1, 2**63, 2**64 + 5, 0, -1]


def _no_leak(reply: httpx.Response, runtime: Runtime) -> None:
    text = reply.text.lower()
    url = runtime.settings.database_url
    assert url.split("://", 1)[1] not in reply.text and "sqlalchemy" not in text
    assert "asyncpg" not in text and "sqlite" not in text and "traceback" not in text


async def test_ids_past_the_database_range_are_422(
    api: httpx.AsyncClient, api_runtime: Runtime, add_cabinet: AddCabinet
) -> None:
    await add_cabinet(0)
    for bad in BAD_IDS:
        for path in (f"/api/v1/cabinets/{bad}", f"/api/v1/cabinets/{bad}/jobs"):
            reply = await api.get(path, headers=AUTH)
            assert reply.status_code == 422, (path, reply.text)
            assert reply.json()["errors"][0]["field"] == "path.cabinet_id"
            _no_leak(reply, api_runtime)
    reply = await api.get(f"/api/v1/cabinets/{CABINET_ID_MAX}", headers=AUTH)
    assert reply.status_code == 404 and reply.json()["type"] == "urn:wbsync:problem:not-found"


async def test_the_store_finds_nothing_for_refs_no_cabinet_can_have(api_runtime: Runtime) -> None:
    from wbsync.errors import CabinetNotFoundError

    refs: list[int | str] = [*BAD_IDS, "nul\x00name"]
    for ref in refs:
        with pytest.raises(CabinetNotFoundError):
            await api_runtime.store.cabinets.get(ref)
        with pytest.raises(CabinetNotFoundError):
            await api_runtime.store.cabinets.remove(ref)


async def test_a_name_with_nul_is_422(
    api: httpx.AsyncClient, api_runtime: Runtime, api_emulator: object
) -> None:
    from tests.support.api import SELLERS
    from wbsync.emulator import Emulator

    assert isinstance(api_emulator, Emulator)
    token = api_emulator.token(SELLERS[0])
    for name in ("shop\x00", "\x00", " \t"):
        reply = await api.post(
            "/api/v1/cabinets", json={"name": name, "token": token}, headers=AUTH
        )
        assert reply.status_code == 422, reply.text
        assert reply.json()["errors"][0]["field"] == "body.name"
        _no_leak(reply, api_runtime)
    ok = await api.post(
        "/api/v1/cabinets", json={"name": "магазин №1", "token": token}, headers=AUTH
    )
    assert ok.status_code == 201


@pytest.mark.parametrize("db_backend", ["sqlite"], indirect=True)
@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("wb/acceptance-coefficients?warehouse_id=-5", "query.warehouse_id.0"),
        ("wb/acceptance-coefficients?warehouse_id=0", "query.warehouse_id.0"),
        (f"wb/acceptance-coefficients?warehouse_id={2**63}", "query.warehouse_id.0"),
        ("wb/adverts?status=-2", "query.status.0"),
        ("wb/adverts?status=5&status=9", "query.status.0"),
        ("wb/goods?offset=-1", "query.offset"),
        (f"wb/goods?offset={2**31}", "query.offset"),
        ("wb/goods?limit=0", "query.limit"),
    ],
)
async def test_wb_filters_out_of_range_are_422_and_never_sent(
    api: httpx.AsyncClient, add_cabinet: AddCabinet, api_emulator: object, path: str, field: str
) -> None:
    from wbsync.emulator import Emulator

    assert isinstance(api_emulator, Emulator)
    cabinet = await add_cabinet(0)
    reply = await api.get(f"/api/v1/cabinets/{cabinet.id}/{path}", headers=AUTH)
    assert reply.status_code == 422, reply.text
    assert [e["field"] for e in reply.json()["errors"]] == [field]
    assert api_emulator.counters.total("requests") == 0


@pytest.mark.parametrize("db_backend", ["sqlite"], indirect=True)
async def test_a_failing_database_is_503_naming_only_the_dependency(
    api: httpx.AsyncClient, api_runtime: Runtime
) -> None:
    await api_runtime.database.aclose()
    reply = await api.get("/api/v1/cabinets", headers=AUTH)
    assert reply.status_code == 503
    body = reply.json()
    assert body["dependency"] == "database" and body["detail"].startswith("the database failed")
    _no_leak(reply, api_runtime)


@pytest.mark.parametrize("db_backend", ["sqlite"], indirect=True)
async def test_a_server_without_a_secret_key_answers_503_not_500(
    api_runtime: Runtime, api_emulator: Emulator, db_backend: str, database_factory: DatabaseFactory
) -> None:
    settings = api_runtime.settings.model_copy(
        update={
            "secret_key": None,
            "database_url": await database_factory.new_migrated_url(db_backend),
        }
    )
    runtime = await Runtime(settings, redis_url=api_runtime.redis_url).start()
    try:
        transport = httpx.ASGITransport(app=create_app(runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://wbsync.test") as api:
            body = {"name": "shop", "token": api_emulator.token(SELLERS[0])}
            reply = await api.post("/api/v1/cabinets", json=body, headers=AUTH)
        assert reply.status_code == 503 and reply.json()["type"].endswith(":misconfigured")
        assert "WBSYNC_SECRET_KEY" not in reply.text  # the log names it; the reply does not
    finally:
        await runtime.aclose()
