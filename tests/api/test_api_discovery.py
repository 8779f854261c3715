"""Dataset discovery over HTTP, and a change-stream consumer that misses trimmed events: it sees
the gap from the events and catches every feed up to the high-water marks discovery gives."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from redis.asyncio import Redis

from tests.support.api import AUTH
from wbsync.shared.change_stream import ChangeStream
from wbsync.shared.runtime import Runtime
from wbsync.store import DATASETS, Cabinet
from wbsync.store.data_schema import data_json_schema


def _stock(nm: int, quantity: int) -> dict[str, int]:
    return {"nmId": nm, "chrtId": 1, "warehouseId": 7, "quantity": quantity}


async def test_lists_every_dataset_with_its_key_kind_schema_and_water_marks(
    api: httpx.AsyncClient, api_runtime: Runtime, add_cabinet: Callable[..., Awaitable[Cabinet]]
) -> None:
    empty = await api.get("/api/v1/datasets", headers=AUTH)
    assert empty.status_code == 200, empty.text
    listed = {d["name"]: d for d in empty.json()["datasets"]}
    assert sorted(listed) == sorted(DATASETS)  # read from the registry at the request
    assert listed["stocks"]["high_water_mark"] == 0 and listed["stocks"]["low_water_mark"] is None

    cabinet = await add_cabinet(0)
    store = api_runtime.store
    await store.upsert("stocks", cabinet.id, [_stock(nm, 1) for nm in range(3)])
    await store.upsert("stocks", cabinet.id, [_stock(0, 2)])  # nm 0 moves to the feed's end
    stocks = (await api.get("/api/v1/datasets/stocks", headers=AUTH)).json()
    assert stocks == {
        "name": "stocks",
        "table": "wb_stocks",
        "owner": "wbsync",
        "source": DATASETS["stocks"].source,
        "scope": "cabinet",
        "kind": "snapshot",
        "key": [
            {"column": "nm_id", "path": "nmId", "kind": "int", "missing": None},
            {"column": "chrt_id", "path": "chrtId", "kind": "int", "missing": None},
            {"column": "warehouse_id", "path": "warehouseId", "kind": "int", "missing": None},
        ],
        "retention_days": None,
        "tombstone_grace_days": 7,
        "high_water_mark": 4,
        "low_water_mark": 2,
        "low_water": 0,
        "feed": "/api/v1/datasets/stocks/changes",
        "data_schema": data_json_schema(DATASETS["stocks"]),
    }
    # The declared main fields, and the key fields required and typed.
    schema = stocks["data_schema"]
    assert schema["properties"]["quantity"] == {"type": "integer"}
    assert schema["required"] == ["nmId", "chrtId", "warehouseId"]
    assert schema["properties"]["warehouseId"] == {"type": "integer"}
    feed = (await api.get(stocks["feed"], headers=AUTH)).json()
    assert [c["seq"] for c in feed["changes"]] == [2, 3, 4] and feed["next"] == 4


async def test_nested_optional_and_dated_keys_in_the_schema(api: httpx.AsyncClient) -> None:
    reply = await api.get("/api/v1/datasets", headers=AUTH)
    listed = {d["name"]: d for d in reply.json()["datasets"]}
    funnel = listed["funnel_history"]
    assert funnel["retention_days"] == 400
    schema = funnel["data_schema"]
    assert schema["required"] == ["product", "date"]
    assert schema["properties"]["product"] == {
        "type": "object",
        "required": ["nmId"],
        "properties": {"nmId": {"type": "integer"}},
    }
    assert schema["properties"]["date"]["pattern"] == r"^\d{4}-\d{2}-\d{2}"
    # WB omits boxTypeID where it does not apply: typed, but not required.
    coefficients = listed["acceptance_coefficients"]["data_schema"]
    assert "boxTypeID" not in coefficients["required"]
    assert coefficients["properties"]["boxTypeID"] == {"type": "integer"}


async def test_an_unknown_dataset_is_a_404_and_the_routes_want_the_key(
    api: httpx.AsyncClient,
) -> None:
    unknown = await api.get("/api/v1/datasets/nope", headers=AUTH)
    assert unknown.status_code == 404 and "no dataset 'nope'" in unknown.json()["detail"]
    assert (await api.get("/api/v1/datasets")).status_code == 401
    assert (await api.get("/api/v1/datasets/stocks")).status_code == 401
    schema = (await api.get("/openapi.json", headers=AUTH)).json()
    assert "DatasetsOut" in schema["components"]["schemas"]
    assert {"/api/v1/datasets", "/api/v1/datasets/{name}"} <= set(schema["paths"])


class Consumer:
    """A change-stream consumer as docs/data.md describes it: fleet-wide feeds over HTTP, one
    cursor per dataset and the number of the last entry it read; an entry number that is not
    the next, or a dataset's event whose ``prev_seq`` is past the cursor, is a gap: it pages
    every dataset's feed from its cursor up to the high-water mark discovery gives."""

    def __init__(self, api: httpx.AsyncClient) -> None:
        self.api = api
        self.cursors: dict[str, int] = {}
        self.stream_seq = 0  # it subscribed before the stream's first entry
        self.read: dict[str, dict[int, Any]] = {}
        self.gaps = 0

    async def on_event(self, fields: dict[str, str]) -> None:
        name = fields["dataset"]
        number, self.stream_seq = self.stream_seq, int(fields["stream_seq"])
        missed = self.stream_seq != number + 1
        if missed or int(fields["prev_seq"]) > self.cursors.get(name, 0):
            self.gaps += 1
            await self.catch_up()
        elif int(fields["last_seq"]) > self.cursors.get(name, 0):  # else a catch-up read it
            await self.page(name, None)

    async def catch_up(self) -> None:
        listed = (await self.api.get("/api/v1/datasets", headers=AUTH)).json()["datasets"]
        for dataset in listed:
            await self.page(dataset["name"], dataset["high_water_mark"])

    async def page(self, name: str, until: int | None) -> None:
        while until is None or self.cursors.get(name, 0) < until:
            params = {"after": self.cursors.get(name, 0), "limit": 2}
            url = f"/api/v1/datasets/{name}/changes"
            reply = await self.api.get(url, params=params, headers=AUTH)
            body = reply.json()
            for change in body["changes"]:
                self.read.setdefault(name, {})[change["seq"]] = change["data"]
            self.cursors[name] = body["next"]
            if not body["more"]:
                return


async def test_a_consumer_reading_after_trimming_sees_the_gap_and_catches_every_feed_up(
    api: httpx.AsyncClient,
    api_runtime: Runtime,
    add_cabinet: Callable[..., Awaitable[Cabinet]],
    redis: Redis,
    prefix: str,
) -> None:
    store = api_runtime.store
    stream = ChangeStream(redis, prefix=f"{prefix}:trimmed", maxlen=1000)
    store.add_listener(stream.publish)
    group = "analytics"
    await redis.xgroup_create(stream.key, group, id="0", mkstream=True)  # it subscribed, then left
    cabinet = await add_cabinet(0)
    # cards goes quiet after two pages; orders keeps writing.
    await store.write("cards", cabinet.id, [{"nmID": 1, "v": 1}, {"nmID": 2, "v": 1}])
    await store.write("cards", cabinet.id, [{"nmID": 1, "v": 2}])
    for page in range(6):
        await store.write("orders", cabinet.id, [{"srid": f"o{page}"}, {"srid": "same", "v": page}])
    # What MAXLEN ~ does while the group is away, exactly: the oldest entries are gone.
    await redis.xtrim(stream.key, maxlen=3, approximate=False)

    consumer = Consumer(api)
    reply: Any = await redis.xreadgroup(group, "worker-1", {stream.key: ">"}, count=100)
    events = [fields for _id, fields in reply[0][1]]
    assert len(events) == 3 and {e["dataset"] for e in events} == {"orders"}
    for fields in events:
        await consumer.on_event(fields)

    assert consumer.gaps == 1  # the first event it got; the catch-up read past the others
    feeds = {name: (await store.changes(name)).changes for name in ("cards", "orders")}
    for name, changes in feeds.items():  # every change read, at its last write, each once
        assert consumer.read[name] == {c.seq: c.data for c in changes}
    assert sorted(d["v"] for d in consumer.read["cards"].values()) == [1, 2]


async def test_the_entry_numbers_show_a_trimmed_event_of_a_dataset_that_went_quiet(
    api: httpx.AsyncClient,
    api_runtime: Runtime,
    add_cabinet: Callable[..., Awaitable[Cabinet]],
    redis: Redis,
    prefix: str,
) -> None:
    """Only the quiet dataset's event was trimmed: no later event of it shows a gap and the
    others' chains are whole; the entries' numbers are what tell."""
    store = api_runtime.store
    stream = ChangeStream(redis, prefix=f"{prefix}:quiet", maxlen=1000)
    store.add_listener(stream.publish)
    await redis.xgroup_create(stream.key, "analytics", id="0", mkstream=True)
    cabinet = await add_cabinet(0)
    await store.write("cards", cabinet.id, [{"nmID": 1}])
    for page in range(3):
        await store.write("orders", cabinet.id, [{"srid": f"o{page}"}])
    await redis.xtrim(stream.key, maxlen=3, approximate=False)  # only the cards event goes

    consumer = Consumer(api)
    reply: Any = await redis.xreadgroup("analytics", "worker-1", {stream.key: ">"}, count=100)
    events = [fields for _id, fields in reply[0][1]]
    assert [e["prev_seq"] for e in events] == ["0", "1", "2"]  # the orders chain is whole
    for fields in events:
        await consumer.on_event(fields)
    assert consumer.gaps == 1
    assert list(consumer.read["cards"].values()) == [{"nmID": 1}]
    assert sorted(consumer.read["orders"]) == [1, 2, 3]
