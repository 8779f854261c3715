"""BullMQ's worker as wbsync bounds it: what it remembers of the fetches it gave up on."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from tests.support.waiting import wait_for
from wbsync import clock, keys, redis_bounds
from wbsync.jobs.bullmq_worker import GIVEN_UP_KEPT, BullmqWorker

Make = Callable[[int], BullmqWorker]


async def _never(job: Any, token: str) -> None:
    raise AssertionError("the worker does not run")


@pytest.fixture
async def make(redis_url: str, prefix: str) -> AsyncIterator[Make]:
    made: list[BullmqWorker] = []

    def build(lock_ms: int) -> BullmqWorker:
        options = {
            "connection": redis_bounds.connect(redis_url),
            "prefix": f"{prefix}:q",
            "autorun": False,  # never fetches: only what it remembers is looked at
            "lockDuration": lock_ms,
        }
        name = keys.bullmq_queue_name("qgiven")
        made.append(BullmqWorker(name, _never, options, connection_name=f"{prefix}:given"))
        return made[-1]

    try:
        yield build
    finally:
        for worker in made:
            await worker.close()


async def test_fetches_given_up_on_are_remembered_up_to_the_bound_newest_first(
    make: Make,
) -> None:
    """Past ``GIVEN_UP_KEPT`` failed fetches within one lock period (an outage of Redis with
    many slots), the oldest are forgotten: the memory stays bounded."""
    worker = make(600_000)
    for n in range(GIVEN_UP_KEPT + 40):
        worker._give_up(f"token-{n}")
    assert list(worker._given_up) == [f"token-{n}" for n in range(40, GIVEN_UP_KEPT + 40)]


async def test_a_fetch_given_up_on_a_lock_period_ago_is_forgotten(make: Make) -> None:
    """A lock period after a fetch was given up on, any job it took has lost its lock to the
    stalled-job check: the next failure forgets it, even while Redis never answers."""
    worker = make(1)
    worker._give_up("old")
    at = worker._given_up["old"]
    await wait_for(lambda: clock.monotonic() > at + 0.001)
    worker._give_up("new")
    assert list(worker._given_up) == ["new"]
