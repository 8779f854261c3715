"""The change stream: one entry per committed page that changed rows, capped, read by a group."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio import Redis

from wbsync import keys
from wbsync.change_stream import ChangeStream
from wbsync.store import Store
from wbsync.store.changes import ChangeEvent


async def test_one_entry_per_page_that_changed_rows_naming_its_last_seq(
    store: Store, redis: Redis, prefix: str
) -> None:
    stream = ChangeStream(redis, prefix=prefix, maxlen=1000)
    store.add_listener(stream.publish)
    cabinet = (await store.cabinets.add("shop", "token", "sid")).id
    page = [{"srid": f"o{i}", "v": 1} for i in range(5)]
    first = await store.write("orders", cabinet, page)
    await store.write("orders", cabinet, page)  # unchanged: no entry
    second = await store.write("orders", cabinet, [{"srid": "o1", "v": 2}, {"srid": "o9"}])

    # A consumer group, as a consumer would read it (XREADGROUP).
    key = keys.change_stream_key(prefix)
    await redis.xgroup_create(key, "analytics", id="0")
    reply: Any = await redis.xreadgroup("analytics", "worker-1", {key: ">"}, count=10)
    entries = [fields for _id, fields in reply[0][1]]
    assert entries == [
        {
            "dataset": "orders",
            "cabinet": str(cabinet),
            "rows": "5",
            "last_seq": str(first.last_seq),
        },
        {
            "dataset": "orders",
            "cabinet": str(cabinet),
            "rows": "2",
            "last_seq": str(second.last_seq),
        },
    ]
    # The entry's last_seq is a cursor: the feed after the first entry holds the second page.
    after = await store.changes("orders", after=int(entries[0]["last_seq"]))
    assert sorted(c.data["srid"] for c in after.changes) == ["o1", "o9"]


async def test_the_stream_is_capped(redis: Redis, prefix: str) -> None:
    stream = ChangeStream(redis, prefix=prefix, maxlen=10)
    for seq in range(1, 1001):
        await stream.publish(ChangeEvent("orders", 1, 1, seq))
    length = await redis.xlen(stream.key)
    # MAXLEN ~ trims whole nodes (100 entries each by default): never far past the cap.
    assert 10 <= length <= 10 + 100
    newest: Any = await redis.xrevrange(stream.key, count=1)
    assert newest[0][1]["last_seq"] == "1000"


async def test_a_refused_notification_is_logged_not_raised(
    prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    dead = Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.5)
    try:
        await ChangeStream(dead, prefix=prefix, maxlen=10).publish(ChangeEvent("orders", 7, 1, 42))
    finally:
        await dead.aclose()
    assert "could not notify orders (cabinet 7, up to seq 42)" in caplog.text
