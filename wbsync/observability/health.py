"""Whether Redis and the database answer, as this process last saw them.

A probe (``monitor``) asks each dependency every ``PROBE_INTERVAL_S`` seconds, each question
bounded by ``PROBE_TIMEOUT_S``. When one stops answering the process logs one WARNING; when it
answers again, one INFO with how long it was away. The gauge ``wbsync_dependency_up{dependency}``
is 1 or 0 meanwhile, and ``/readyz`` answers 503 naming it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping

from prometheus_client import Gauge

from wbsync.system import clock

log = logging.getLogger(__name__)

PROBE_INTERVAL_S = 1.0
#: The deadline of one probe. A probe is one round trip to Redis (``PING``) and two to the
#: database (``SELECT 1`` on the probe's own pooled connection, after its pre-ping), four when
#: that connection must be opened again: ready over links of up to ~700 ms round trip.
PROBE_TIMEOUT_S = 3.0

DEPENDENCY_UP = Gauge(
    "wbsync_dependency_up",
    "1 while a dependency (redis, database) answered its last probe, 0 while it does not.",
    ["dependency"],
)

_NAMES = {"redis": "Redis", "database": "the database"}

Probe = Callable[[], Awaitable[object]]


class Health:
    """The up/down state of each dependency; logs and sets the gauge on each change only."""

    def __init__(self) -> None:
        self._down_since: dict[str, float] = {}

    def down(self, dependency: str, why: BaseException) -> None:
        """``dependency`` did not answer; the first time of an outage logs a WARNING."""
        DEPENDENCY_UP.labels(dependency).set(0)
        if dependency not in self._down_since:
            self._down_since[dependency] = clock.monotonic()
            reason = str(why) or type(why).__name__
            log.warning("%s is not answering (%s)", _NAMES.get(dependency, dependency), reason)

    def up(self, dependency: str) -> None:
        """``dependency`` answered; the end of an outage logs an INFO."""
        DEPENDENCY_UP.labels(dependency).set(1)
        since = self._down_since.pop(dependency, None)
        if since is not None:
            away = clock.monotonic() - since
            log.info("%s is back after %.1f s", _NAMES.get(dependency, dependency), away)

    def down_now(self) -> list[str]:
        """The dependencies down at the last probe."""
        return sorted(self._down_since)


async def check(health: Health, probes: Mapping[str, Probe]) -> list[str]:
    """Ask every dependency once (bounded), record the answers; the ones that did not answer."""
    results = await asyncio.gather(
        *(asyncio.wait_for(probe(), PROBE_TIMEOUT_S) for probe in probes.values()),
        return_exceptions=True,
    )
    failed = []
    for name, result in zip(probes, results, strict=True):
        if isinstance(result, asyncio.CancelledError):
            raise result
        if isinstance(result, BaseException):
            health.down(name, result)
            failed.append(name)
        else:
            health.up(name)
    return failed


async def monitor(health: Health, probes: Mapping[str, Probe], stop: asyncio.Event) -> None:
    """Probe every ``PROBE_INTERVAL_S`` until ``stop`` is set."""
    while not stop.is_set():
        await check(health, probes)
        try:
            await asyncio.wait_for(stop.wait(), PROBE_INTERVAL_S)
        except TimeoutError:
            pass
