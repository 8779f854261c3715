"""WB's calendar is Moscow's: late in the UTC evening it is already tomorrow at WB, and every
dated method still succeeds; a window computed from the UTC date is refused."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta

import pytest

from tests.support.calendar import reading
from tests.support.limiter import LimiterFactory
from wbsync.config import Settings
from wbsync.demo.expected import expected_datasets
from wbsync.emulator import EmulatorConfig, SellerSizes, running_emulator
from wbsync.emulator.server import Emulator
from wbsync.errors import WbRequestError
from wbsync.shared.runtime import client_options
from wbsync.store import Store
from wbsync.store.datasets import DATASETS
from wbsync.syncs import SYNCS, SyncInput, SyncOptions, run_sync
from wbsync.syncs.digitization import funnel_history
from wbsync.system import clock
from wbsync.wb.client import WbClient

SCALE = 0.001  # WB's limits: a minute is 60 ms
SELLER = "7a1c2e3f-4b5d-4e6f-8a9b-0c1d2e3f4a5b"
EVENING = datetime(2026, 12, 5, 21, 30, tzinfo=UTC)  # 00:30 on the 6th in Moscow
MIDNIGHT = datetime(2026, 12, 5, 23, 59, tzinfo=UTC)  # 02:59 on the 6th in Moscow
DATED = ["rnp-finance-sync", "rnp-sections-sync", "rnp-ads-sync", "digitization-sync"]
OPTIONS = SyncOptions()


@pytest.fixture(params=[EVENING, MIDNIGHT], ids=["21:30Z", "23:59Z"])
def moment(request: pytest.FixtureRequest) -> Iterator[datetime]:
    """This process's calendar (the client's, and the in-process emulator's default today)
    standing at a late UTC hour; real again afterwards."""
    at: datetime = request.param
    still = reading(at)
    clock.set_calendar(still.origin, still.time_scale)
    yield at
    clock.set_calendar(None)


@pytest.fixture
async def emulator(moment: datetime) -> AsyncIterator[Emulator]:
    # anchor_date left to its default: the emulator's own idea of WB's today.
    config = EmulatorConfig(time_scale=SCALE, sizes=SellerSizes(products=30, campaigns=8))
    async with running_emulator(config) as emu:
        yield emu


async def test_every_dated_method_succeeds_late_in_the_utc_evening(
    moment: datetime, emulator: Emulator, store: Store, limiter_factory: LimiterFactory
) -> None:
    today = clock.wb_today()
    assert today == moment.date() + timedelta(days=1) == emulator.config.today()
    cabinet = await store.cabinets.add("shop", emulator.token(SELLER), SELLER)
    settings = Settings(wb_base_url=emulator.base_url, time_scale=SCALE)
    async with WbClient(
        "shop",
        emulator.token(SELLER),
        limiter_factory(time_scale=SCALE),
        options=client_options(settings),
    ) as client:
        for name in DATED:
            inp = SyncInput(client, store, cabinet.id, None, clock.wb_today(), OPTIONS)
            await run_sync(SYNCS[name], inp)
    expected = expected_datasets(emulator, SELLER, today=today, options=OPTIONS)
    for name in DATED:
        for dataset in SYNCS[name].datasets:
            spec = DATASETS[dataset]
            stored = {spec.row_key(r) for r in await store.fetch(dataset, cabinet.id)}
            assert stored == {spec.row_key(r) for r in expected[dataset]}, dataset
            assert stored, dataset
    counts = emulator.counters.snapshot()["sellers"][SELLER]
    refused = {m: c["status"] for m, c in counts.items() if set(c["status"]) - {"200", "204"}}
    assert refused == {}


@pytest.mark.parametrize("moment", [EVENING], indirect=True, ids=["21:30Z"])
async def test_a_funnel_window_from_the_utc_date_is_refused_at_2130(
    emulator: Emulator, limiter_factory: LimiterFactory
) -> None:
    week = timedelta(days=6)
    nm_ids = [p.nm_id for p in emulator.state.data(SELLER).products[:3]]
    settings = Settings(wb_base_url=emulator.base_url, time_scale=SCALE)
    async with WbClient(
        "shop",
        emulator.token(SELLER),
        limiter_factory(time_scale=SCALE),
        options=client_options(settings),
    ) as client:
        utc_today = clock.calendar_now().date()  # the old computation
        with pytest.raises(WbRequestError, match="invalid start day") as refused:
            async for _ in funnel_history(
                client, nm_ids=nm_ids, start=utc_today - week, end=utc_today
            ):
                pass
        assert refused.value.status == 400
        wb_today = clock.wb_today()
        pages = [
            page
            async for page in funnel_history(
                client, nm_ids=nm_ids, start=wb_today - week, end=wb_today
            )
        ]
        assert sum(len(p.rows) for p in pages) == len(nm_ids)
