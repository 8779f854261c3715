"""The autobidder's write as WB answers it: v1 per item where the token type allows it, v0 else;
each bid's outcome on its row (``last_write_error``) and on ``wbsync_bid_writes_total``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.support.limiter import LimiterFactory
from wbsync.config import Settings
from wbsync.emulator import EmulatorConfig, SellerSizes, running_emulator
from wbsync.emulator.server import Emulator
from wbsync.emulator.tokens import Kind
from wbsync.observability.metrics import sample
from wbsync.shared.runtime import client_options
from wbsync.store import Store
from wbsync.syncs import SYNCS, BidRule, SyncInput, SyncOptions, run_sync
from wbsync.syncs.autobidder import ACTIVE, WRITE_ERROR_MAX_CHARS, biddable, write_error_note
from wbsync.wb.client import WbClient

SCALE = 0.001
SELLER = "7a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
# Every bid moves 50 rubles down: from 250 + campaign + cluster rubles to 200 + the same.
OPTIONS = SyncOptions(bid_rule=BidRule(target=100, step=50))
SIZES = SellerSizes(products=20, campaigns=20)

Key = tuple[Any, ...]


def _config(**changes: Any) -> EmulatorConfig:
    return EmulatorConfig(time_scale=SCALE, sizes=SIZES, **changes)


@pytest.fixture
async def emulator() -> AsyncIterator[Emulator]:
    async with running_emulator(_config()) as emu:
        yield emu


def _biddable_bids(emu: Emulator) -> dict[Key, int]:
    """The kopecks of every bid the autobidder reads (active campaigns that take bids)."""
    ids = {
        c["id"]
        for c in emu.expected(SELLER, "promotion.adverts")
        if c["status"] == ACTIVE and biddable(c)
    }
    return {
        (b["advert_id"], b["nm_id"], b["norm_query"]): b["bid_kopecks"]
        for b in emu.expected(SELLER, "promotion.get_bids")
        if b["advert_id"] in ids
    }


def _counts() -> dict[str, float]:
    return {o: sample("wbsync_bid_writes_total", outcome=o) for o in ("ok", "refused")}


async def _run(
    emu: Emulator,
    store: Store,
    limiter_factory: LimiterFactory,
    token_type: Kind,
    options: SyncOptions = OPTIONS,
) -> tuple[int, dict[Key, str | None], dict[str, float]]:
    """One autobidder run with a token of ``token_type`` (the cabinet added at the first): the
    cabinet, its bids' ``last_write_error`` and how much each outcome's count grew."""
    token = emu.token(SELLER, token_type=token_type)
    known = [c for c in await store.cabinets.list() if c.name == "shop"]
    cabinet = known[0] if known else await store.cabinets.add("shop", token, SELLER)
    settings = Settings(
        wb_base_url=emu.base_url, wb_sandbox_base_url=emu.sandbox_url, time_scale=SCALE
    )
    before = _counts()
    async with WbClient(
        "shop", token, limiter_factory(time_scale=SCALE), options=client_options(settings)
    ) as client:
        inp = SyncInput(client, store, cabinet.id, None, emu.config.anchor_date, options)
        await run_sync(SYNCS["autobidder-sync"], inp)
    grown = {o: n - before[o] for o, n in _counts().items()}
    return cabinet.id, await store.column("bids", cabinet.id, "last_write_error"), grown


def _statuses(emu: Emulator, method: str) -> dict[str, int]:
    seller = emu.counters.snapshot()["sellers"][SELLER]
    return dict(seller[method]["status"]) if method in seller else {}


async def test_a_write_wb_applies_whole_leaves_every_row_without_error(
    emulator: Emulator, store: Store, limiter_factory: LimiterFactory
) -> None:
    before = _biddable_bids(emulator)
    cabinet_id, notes, grown = await _run(emulator, store, limiter_factory, Kind.PERSONAL)

    assert set(notes) == set(before) and all(v is None for v in notes.values())
    assert grown == {"ok": len(before), "refused": 0}
    after = _biddable_bids(emulator)
    assert after == {k: v - 5000 for k, v in before.items()}
    assert _statuses(emulator, "promotion.set_bids_v1") == {"200": 1}  # 100 bids a call
    assert _statuses(emulator, "promotion.set_bids") == {}
    stored = await store.fetch("bids", cabinet_id)
    assert {(r["advert_id"], r["nm_id"], r["norm_query"]): r["bid_kopecks"] for r in stored} == (
        after
    )


async def test_a_partial_failure_keeps_wb_words_on_the_refused_rows_only(
    store: Store, limiter_factory: LimiterFactory
) -> None:
    async with running_emulator(_config(min_bid_kopecks=21_000)) as emu:
        before = _biddable_bids(emu)
        low = {k for k, v in before.items() if v - 5000 < 21_000}
        assert 0 < len(low) < len(before)  # some bids would go below WB's minimum, not all
        cabinet_id, notes, grown = await _run(emu, store, limiter_factory, Kind.PERSONAL)
        after = _biddable_bids(emu)
        statuses = _statuses(emu, "promotion.set_bids_v1")

    assert statuses == {"200": 1}  # one call, answered in part
    assert grown == {"ok": len(before) - len(low), "refused": len(low)}
    for key, note in notes.items():
        if key in low:
            assert note is not None and "below the minimum bid" in note, key
            assert after[key] == before[key]  # WB kept the old bid
        else:
            assert note is None, key
            assert after[key] == before[key] - 5000
    stored = await store.fetch("bids", cabinet_id)
    assert {(r["advert_id"], r["nm_id"], r["norm_query"]): r["bid_kopecks"] for r in stored} == (
        after
    )


async def test_a_later_write_wb_applies_clears_the_error(
    store: Store, limiter_factory: LimiterFactory
) -> None:
    async with running_emulator(_config(min_bid_kopecks=21_000)) as emu:
        _, notes, _ = await _run(emu, store, limiter_factory, Kind.PERSONAL)
        refused = {k for k, v in notes.items() if v is not None}
        assert refused
        # The next run moves every bid up, above the minimum: WB sets them all.
        up = SyncOptions(bid_rule=BidRule(target=1000, step=50))
        _, cleared, grown = await _run(emu, store, limiter_factory, Kind.PERSONAL, up)
    assert set(cleared) == set(notes) and all(v is None for v in cleared.values())
    assert grown == {"ok": len(notes), "refused": 0}


async def test_a_test_token_writes_with_v0(
    emulator: Emulator, store: Store, limiter_factory: LimiterFactory
) -> None:
    before = _biddable_bids(emulator)
    _, notes, grown = await _run(emulator, store, limiter_factory, Kind.TEST)

    assert _statuses(emulator, "promotion.set_bids_v1") == {}  # never asked: WB refuses the type
    assert _statuses(emulator, "promotion.set_bids") == {"200": 1}
    assert grown == {"ok": len(before), "refused": 0}
    assert set(notes) == set(before) and all(v is None for v in notes.values())
    assert _biddable_bids(emulator) == {k: v - 5000 for k, v in before.items()}


async def test_v1_switched_off_moves_the_run_to_v0(
    store: Store, limiter_factory: LimiterFactory
) -> None:
    async with running_emulator(_config(disabled=["promotion.set_bids_v1"])) as emu:
        before = _biddable_bids(emu)
        _, notes, grown = await _run(emu, store, limiter_factory, Kind.PERSONAL)
        after = _biddable_bids(emu)
        assert _statuses(emu, "promotion.set_bids_v1") == {"404": 1}
        assert _statuses(emu, "promotion.set_bids") == {"200": 1}
    assert grown == {"ok": len(before), "refused": 0}
    assert all(v is None for v in notes.values())
    assert after == {k: v - 5000 for k, v in before.items()}


def test_a_note_is_bounded_and_storable() -> None:
    long = "ставка ниже минимальной " * 100
    assert len(long) > WRITE_ERROR_MAX_CHARS
    assert write_error_note(long) == long.strip()[:WRITE_ERROR_MAX_CHARS]
    assert write_error_note("bid\x00 too\nlow\t") == "bid  too low"  # no NUL for PostgreSQL
