"""Cursors round trip per (cabinet, sync); the send logs and price targets."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from wbsync.errors import StoreError
from wbsync.store import PriceTarget, SentBid, Store


async def _cabinet(store: Store, name: str = "shop") -> int:
    return (await store.cabinets.add(name, "token", "sid")).id


async def test_cursor_round_trip_and_overwrite(store: Store) -> None:
    cabinet = await _cabinet(store)
    assert await store.cursors.get(cabinet, "catalog-sync") is None

    first = {"updatedAt": "2026-08-01T00:00:00Z", "nmID": 123, "nested": {"a": [1, "два"]}}
    await store.cursors.save(cabinet, "catalog-sync", first)
    assert await store.cursors.get(cabinet, "catalog-sync") == first

    await store.cursors.save(cabinet, "catalog-sync", {"nmID": 456})
    assert await store.cursors.get(cabinet, "catalog-sync") == {"nmID": 456}


async def test_cursors_are_per_cabinet_and_sync(store: Store) -> None:
    a, b = await _cabinet(store, "a"), await _cabinet(store, "b")
    await store.cursors.save(a, "orders", {"dateFrom": "A"})
    await store.cursors.save(b, "orders", {"dateFrom": "B"})
    await store.cursors.save(a, "sales", {"dateFrom": "S"})
    assert await store.cursors.get(a, "orders") == {"dateFrom": "A"}
    assert await store.cursors.get(b, "orders") == {"dateFrom": "B"}
    assert await store.cursors.get(a, "sales") == {"dateFrom": "S"}

    assert await store.cursors.reset(a, "orders") is True
    assert await store.cursors.reset(a, "orders") is False
    assert await store.cursors.get(a, "orders") is None
    assert await store.cursors.get(b, "orders") == {"dateFrom": "B"}


async def test_cursor_of_unknown_cabinet_is_a_store_error(store: Store) -> None:
    with pytest.raises(StoreError):
        await store.cursors.save(999_999, "orders", {"x": 1})


async def test_sent_bids_are_appended_newest_first(store: Store) -> None:
    cabinet = await _cabinet(store)
    early = datetime(2026, 8, 1, 12, 0, tzinfo=UTC)
    await store.ledger.record_bids(
        [SentBid(cabinet, advert_id=1, nm_id=5, new_bid=300, old_bid=250, sent_at=early)]
    )
    await store.ledger.record_bids(
        [SentBid(cabinet, advert_id=1, nm_id=5, new_bid=350, old_bid=300, norm_query="платье")]
    )
    await store.ledger.record_bids([])
    bids = await store.ledger.sent_bids(cabinet)
    assert [(b.old_bid, b.new_bid) for b in bids] == [(300, 350), (250, 300)]
    assert bids[0].norm_query == "платье"
    assert bids[1].sent_at == early


async def test_price_uploads_keep_the_payload(store: Store) -> None:
    cabinet = await _cabinet(store)
    payload = {"data": [{"nmID": 5, "price": 1000, "discount": 10}]}
    intent = await store.ledger.begin_price_upload(cabinet, payload)
    [pending] = await store.ledger.price_uploads(cabinet)
    assert (pending.task_id, pending.items_count, pending.payload) == (None, 1, payload)
    # Sent again after a crash: the unfinished intent is the same record, not a second one.
    assert await store.ledger.begin_price_upload(cabinet, payload) == intent
    await store.ledger.finish_price_upload(intent, 42)
    [upload] = await store.ledger.price_uploads(cabinet)
    assert (upload.task_id, upload.items_count, upload.payload) == (42, 1, payload)
    assert upload.sent_at is not None and upload.sent_at.tzinfo is not None
    # Once finished, the same payload uploaded again is a new upload.
    assert await store.ledger.begin_price_upload(cabinet, payload) != intent


async def test_price_targets_upsert_and_clear(store: Store) -> None:
    cabinet = await _cabinet(store)
    await store.ledger.set_price_targets(
        cabinet, [PriceTarget(2, 1000, 10), PriceTarget(1, 500, None)]
    )
    await store.ledger.set_price_targets(cabinet, [PriceTarget(2, 1100, 15)])
    assert await store.ledger.price_targets(cabinet) == [
        PriceTarget(1, 500, None),
        PriceTarget(2, 1100, 15),
    ]
    assert await store.ledger.clear_price_targets(cabinet, [1]) == 1
    assert await store.ledger.price_targets(cabinet) == [PriceTarget(2, 1100, 15)]
    assert await store.ledger.clear_price_targets(cabinet) == 1
