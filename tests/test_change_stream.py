"""The change stream: one entry per committed page that changed rows, capped, read by a group;
its numbers chain each dataset's events, so a consumer sees the events it missed."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio import Redis

from wbsync.redis import keys
from wbsync.shared.change_stream import ChangeStream
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

    assert first.last_seq is not None
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
            "first_seq": "1",
            "prev_seq": "0",
            "stream_seq": "1",
        },
        {
            "dataset": "orders",
            "cabinet": str(cabinet),
            "rows": "2",
            "last_seq": str(second.last_seq),
            "first_seq": str(first.last_seq + 1),
            "prev_seq": str(first.last_seq),
            "stream_seq": "2",
        },
    ]
    # The entry's last_seq is a cursor: the feed after the first entry holds the second page.
    after = await store.changes("orders", after=int(entries[0]["last_seq"]))
    assert sorted(c.data["srid"] for c in after.changes) == ["o1", "o9"]


async def test_the_stream_is_capped(redis: Redis, prefix: str) -> None:
    stream = ChangeStream(redis, prefix=prefix, maxlen=10)
    for seq in range(1, 1001):
        await stream.publish(ChangeEvent("orders", 1, 1, seq, prev_seq=seq - 1))
    length = await redis.xlen(stream.key)
    # MAXLEN ~ trims whole nodes (100 entries each by default): never far past the cap.
    assert 10 <= length <= 10 + 100
    newest: Any = await redis.xrevrange(stream.key, count=1)
    assert newest[0][1]["last_seq"] == "1000" and newest[0][1]["stream_seq"] == "1000"
    # What the cap took shows in the numbers: the oldest entry left is not the first.
    oldest: Any = await redis.xrange(stream.key, count=1)
    assert int(oldest[0][1]["stream_seq"]) == 1000 - length + 1 > 1


async def test_a_refused_notification_is_logged_not_raised(
    prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    dead = Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.5)
    try:
        event = ChangeEvent("orders", 7, 1, 42, prev_seq=41)
        await ChangeStream(dead, prefix=prefix, maxlen=10).publish(event)
    finally:
        await dead.aclose()
    assert "could not notify orders (cabinet 7, up to seq 42)" in caplog.text


async def test_each_datasets_events_chain_through_writes_tombstones_and_cabinets(
    store: Store, redis: Redis, prefix: str
) -> None:
    stream = ChangeStream(redis, prefix=prefix, maxlen=1000)
    store.add_listener(stream.publish)
    first = (await store.cabinets.add("one", "token", "s1")).id
    second = (await store.cabinets.add("two", "token", "s2")).id
    stock = [{"nmId": nm, "chrtId": 1, "warehouseId": 1, "quantity": 1} for nm in range(4)]
    await store.write("stocks", first, stock)
    await store.write("orders", second, [{"srid": "a"}])
    await store.write("stocks", second, stock[:2])
    await store.snapshots.begin("stocks", first)
    await store.write("stocks", first, stock[:1], seen=True)
    await store.snapshots.complete("stocks", first)  # three tombstones: an event of their own
    await store.write("stocks", first, stock[:1], whole=True)  # unchanged: no event
    await store.write("orders", first, [{"srid": "a"}, {"srid": "b"}])

    entries: Any = await redis.xrange(stream.key)
    by_dataset: dict[str, list[dict[str, str]]] = {}
    for _id, fields in entries:
        by_dataset.setdefault(fields["dataset"], []).append(fields)
    assert [int(f["rows"]) for f in by_dataset["stocks"]] == [4, 2, 3]
    # The entries are numbered one after the other, whichever dataset's.
    assert [int(f["stream_seq"]) for _id, f in entries] == list(range(1, len(entries) + 1))
    for events in by_dataset.values():
        # Each event's prev_seq is the last_seq of the dataset's event before it (0 first).
        lasts = [int(f["last_seq"]) for f in events]
        assert [int(f["prev_seq"]) for f in events] == [0, *lasts[:-1]]
        assert all(int(f["first_seq"]) == int(f["prev_seq"]) + 1 for f in events)
    for name, events in by_dataset.items():
        # The feed holds no change outside what the events announced.
        page = await store.changes(name)
        assert page.next == int(events[-1]["last_seq"])
