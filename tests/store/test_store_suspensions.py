"""Suspensions: stored with WB's words, read in one query, a probe claimed once, lifted by hand
or by a new token; each cabinet's token expiry kept."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from wbsync.store import NewCabinet, Store, Suspension
from wbsync.store.schema import utcnow

TOKEN = "eyJhbGciOiJFUzI1NiJ9.eyJzaWQiOiJzZWxsZXIifQ.c2lnbmF0dXJlLXNlY3JldC12YWx1ZQ"
EXP = datetime(2027, 6, 1, 12, 0, tzinfo=UTC)


async def test_suspend_read_and_lift(store: Store) -> None:
    shop = await store.cabinets.add("shop", TOKEN, "sid-1")
    other = await store.cabinets.add("other", TOKEN, "sid-2")
    probe = utcnow() + timedelta(hours=6)
    whole = await store.suspended.suspend(
        shop.id, None, kind="token", words="unauthorized: token problem; revoked", probe_at=probe
    )
    assert whole is not None and whole.cabinet == "shop" and whole.section is None
    assert whole.probe_at == probe and whole.since.tzinfo is not None
    await store.suspended.suspend(
        shop.id, "statistics", kind="category", words="token scope not allowed", probe_at=probe
    )
    await store.suspended.suspend(other.id, "promotion", kind="payment", words="no", probe_at=None)

    found = await store.suspensions()
    assert [(s.cabinet, s.section, s.kind) for s in found] == [
        ("shop", None, "token"),
        ("shop", "statistics", "category"),
        ("other", "promotion", "payment"),
    ]
    assert all(isinstance(s, Suspension) for s in found)
    assert found[0].covers("content") and found[1].covers("statistics")
    assert not found[1].covers("content")

    lifted = await store.lift_suspensions(shop.id, "statistics")
    assert [(s.section, s.words) for s in lifted] == [("statistics", "token scope not allowed")]
    assert await store.lift_suspensions(shop.id, "statistics") == []
    lifted = await store.lift_suspensions(shop.id)
    assert [s.kind for s in lifted] == ["token"]
    assert [s.cabinet for s in await store.suspensions()] == ["other"]


async def test_a_renewal_keeps_since_and_takes_the_new_words(store: Store) -> None:
    shop = await store.cabinets.add("shop", TOKEN, "sid-1")
    first = await store.suspended.suspend(
        shop.id, "content", kind="refused", words="a", probe_at=None
    )
    later = utcnow() + timedelta(hours=1)
    again = await store.suspended.suspend(
        shop.id, "content", kind="token_type", words="b", probe_at=later
    )
    assert first is not None and again is not None
    assert again.since == first.since and (again.kind, again.words) == ("token_type", "b")
    assert again.probe_at == later
    assert (
        await store.suspended.suspend(9999, None, kind="token", words=None, probe_at=None) is None
    )
    with pytest.raises(ValueError, match="kind"):
        await store.suspended.suspend(shop.id, None, kind="bogus", words=None, probe_at=None)


async def test_a_probe_is_claimed_once(store: Store) -> None:
    shop = await store.cabinets.add("shop", TOKEN, "sid-1")
    due = utcnow()
    await store.suspended.suspend(shop.id, None, kind="token", words="x", probe_at=due)
    later = due + timedelta(hours=6)
    assert await store.suspended.claim_probe(shop.id, None, due=due, next_at=later)
    assert not await store.suspended.claim_probe(shop.id, None, due=due, next_at=later)
    [held] = await store.suspended.of_cabinet(shop.id)
    assert held.probe_at == later


async def test_a_new_token_lifts_the_cabinets_suspensions(store: Store) -> None:
    shop = await store.cabinets.add("shop", TOKEN, "sid-1", token_expires_at=EXP)
    await store.suspended.suspend(shop.id, None, kind="token", words="revoked", probe_at=None)
    await store.suspended.suspend(shop.id, "content", kind="category", words="x", probe_at=None)
    later = EXP + timedelta(days=180)
    replaced = await store.cabinets.replace_token(shop.id, TOKEN, "sid-1", token_expires_at=later)
    assert replaced.token_expires_at == later
    assert await store.suspensions() == []


async def test_token_expiries_of_active_cabinets(store: Store) -> None:
    shop = await store.cabinets.add("shop", TOKEN, "sid-1", token_expires_at=EXP)
    old = await store.cabinets.add("old", TOKEN, "sid-2")
    gone = await store.cabinets.add("gone", TOKEN, "sid-3", token_expires_at=EXP)
    await store.cabinets.deactivate(gone.id)
    many = await store.cabinets.add_many([NewCabinet("bulk", TOKEN, "sid-4", token_expires_at=EXP)])
    assert shop.token_expires_at == EXP
    assert (await store.cabinets.get(shop.id)).token_expires_at == EXP
    assert (await store.cabinets.get("shop")).token_expires_at == EXP
    assert await store.token_expiries() == [
        (shop.id, "shop", EXP),
        (old.id, "old", None),
        (many.added[0].id, "bulk", EXP),
    ]
    await store.cabinets.set_token_expiry(old.id, EXP)
    assert (await store.cabinets.get(old.id)).token_expires_at == EXP


async def test_a_removed_cabinet_takes_its_suspensions(store: Store) -> None:
    shop = await store.cabinets.add("shop", TOKEN, "sid-1")
    await store.suspended.suspend(shop.id, None, kind="expired", words=None, probe_at=None)
    await store.cabinets.remove(shop.id)
    assert await store.suspensions() == []


async def test_a_jobs_read_of_its_cabinet_says_whether_it_is_suspended(store: Store) -> None:
    shop = await store.cabinets.add("shop", TOKEN, "sid-1")
    assert (await store.cabinets.get(shop.id)).suspended is False
    assert (await store.cabinets.with_cursor(shop.id, "orders"))[0].suspended is False
    assert (await store.cabinets.get("shop")).suspended is None  # by name: not read
    await store.suspended.suspend(shop.id, "finance", kind="payment", words=None, probe_at=None)
    assert (await store.cabinets.get(shop.id)).suspended is True
    assert (await store.cabinets.with_cursor(shop.id, "orders"))[0].suspended is True
