"""Fleet-wide syncs: data WB serves the same to every seller, fetched once for the whole fleet.

A sync whose datasets are fleet-wide (``Dataset.scope == "fleet"``, ``Sync.fleet``) has one job
per interval for the fleet (the fan-out's one entry, :data:`FLEET_JOB`), not one per cabinet.
Its run is carried by one cabinet's token (:class:`FleetCarriers`):

* the candidates are the active cabinets whose token may call every method of the sync (token
  type, category, expiry: ``check_token``) and that no suspension covers (the whole cabinet,
  or a section the sync calls): a token WB refused is never used for the fleet, and a
  suspended cabinet's probes stay its own jobs' business;
* they take turns: each interval of the queue starts at the next unsuspended cabinet (by
  cabinet id), so no one seller's budget pays for the fleet every time;
* of the first :data:`CARRIERS_TRIED` in turn, those whose buckets of the sync's methods (and
  whose seller's global bucket) have a token now go first (``RateLimiter.peek_many``: nothing
  taken), the others by their wait;
* a carrier whose bucket would make the run wait past the deferral threshold hands the run to
  the next (the cursor in the job's data, so no page is fetched twice); when every one tried
  would wait, the job defers for the shortest wait (the reschedule service decides);
* a carrier WB refuses for good is suspended as any cabinet is (``SuspensionGate.suspend``)
  and the next one goes on; when none is left the job ends as ``needs_attention``.

The run is recorded in ``sync_runs`` as the run of the cabinet that carried it (its success or
its failure; docs/data.md, "Fleet-wide datasets"), so the status page shows which token served
the fleet and when; its rows belong to nobody (a table with no cabinet column).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from wbsync.cabinets.suspending import NEEDS_ATTENTION, SuspensionGate, sections_of
from wbsync.errors import RateLimitDeferred, TokenError, WbSyncError
from wbsync.jobs.contract import FLEET_JOB
from wbsync.jobs.handle import JobHandle
from wbsync.shared.runtime import Runtime
from wbsync.store import Cabinet
from wbsync.store.runs import failure_reason
from wbsync.store.schema import utcnow
from wbsync.syncs import Sync
from wbsync.system import clock
from wbsync.values.scope import BucketScope
from wbsync.wb.endpoints import check_token
from wbsync.wb.refusals import refusal_for_good
from wbsync.wb.tokens import parse_token

__all__ = ["CARRIERS_TRIED", "FLEET_JOB", "FleetCarriers"]

log = logging.getLogger(__name__)

#: Carriers a fleet run considers at most (their buckets peeked in one pass, each tried in
#: turn when the one before would wait or was refused): bounds the Redis work of a run, however
#: many cabinets the fleet has.
CARRIERS_TRIED = 8

Pull = Callable[[Cabinet], Awaitable[dict[str, Any]]]
"""Runs the sync with the given cabinet's token from the job's cursor; its outcome."""


class FleetCarriers:
    """Picks the cabinet whose token carries a fleet-wide sync's run, and runs it."""

    def __init__(
        self, runtime: Runtime, sync: Sync, gate: SuspensionGate, *, interval_ms: float
    ) -> None:
        if interval_ms <= 0:
            raise ValueError("interval_ms must be > 0")
        self._runtime = runtime
        self._sync = sync
        self._gate = gate
        self._interval_ms = interval_ms
        self._sections = sections_of(sync)

    async def candidates(self) -> list[Cabinet]:
        """The cabinets that may carry the run, in this interval's turn (at most
        ``CARRIERS_TRIED``), those with their buckets free now first."""
        store = self._runtime.store
        blocked = {
            s.cabinet_id
            for s in await store.suspensions()
            if s.section is None or s.section in self._sections
        }
        now = utcnow()
        pool = [
            cabinet
            for cabinet in sorted(await store.cabinets.list(active_only=True), key=lambda c: c.id)
            if cabinet.id not in blocked
            and (cabinet.token_expires_at is None or cabinet.token_expires_at > now)
        ]
        if not pool:
            return []
        # The turn is over the cabinets no suspension covers; tokens are read from it on, only
        # until enough may carry the run (a fleet of thousands decrypts a handful).
        turn = int(clock.now_ms() // self._interval_ms) % len(pool)
        chosen = []
        for cabinet in pool[turn:] + pool[:turn]:
            if self._may_call(cabinet):
                chosen.append(cabinet)
                if len(chosen) == CARRIERS_TRIED:
                    break
        if not chosen:
            return []
        waits = await self._waits(chosen)
        order = sorted(range(len(chosen)), key=lambda i: (waits[i] > 0, waits[i], i))
        return [chosen[i] for i in order]

    def _may_call(self, cabinet: Cabinet) -> bool:
        try:
            token = parse_token(cabinet.token(), cabinet=cabinet.name)
            for ep in self._sync.calls:
                check_token(token, ep, cabinet=cabinet.name)
        except TokenError:
            return False
        return True

    async def _waits(self, cabinets: list[Cabinet]) -> list[int]:
        """Each cabinet's longest wait (ms) for a token of the sync's buckets (0: free now)."""
        limiter = self._runtime.limiter
        scopes: list[BucketScope] = []
        owners: list[int] = []
        for index, cabinet in enumerate(cabinets):
            client = self._runtime.client(cabinet)
            mine = {s for ep in self._sync.calls for s in limiter.spends(client.scope(ep))}
            scopes.extend(mine)
            owners.extend([index] * len(mine))
        waits = [0] * len(cabinets)
        for owner, result in zip(owners, await limiter.peek_many(scopes), strict=True):
            if not result.acquired:
                waits[owner] = max(waits[owner], result.wait_ms)
        return waits

    async def run(self, job: JobHandle, pull: Pull) -> dict[str, Any]:
        """Run the fleet's job with the first candidate that goes through (see the module)."""
        sync = self._sync
        candidates = await self.candidates()
        if not candidates:
            log.warning("%s: no active cabinet may carry the fleet's run; nothing sent", sync.name)
            return {"outcome": NEEDS_ATTENTION, "kind": "no-carrier", "sent": 0, "job": FLEET_JOB}
        deferred: RateLimitDeferred | None = None
        for cabinet in candidates:
            try:
                done = await pull(cabinet)
            except RateLimitDeferred as exc:  # this seller's bucket is not free: the next one
                if deferred is None or exc.wait_ms < deferred.wait_ms:
                    deferred = exc
                continue
            except Exception as exc:
                refusal = refusal_for_good(exc)
                if refusal is None:
                    await self._failed(cabinet, exc, job.attempts_made + 1)
                    raise
                await self._gate.suspend(cabinet, sync, refusal)  # never carries it again
                continue
            log.info("%s: the fleet's run carried by cabinet %s", sync.name, cabinet.name)
            return {**done, "carrier": cabinet.id}
        if deferred is not None:
            raise deferred
        return {"outcome": NEEDS_ATTENTION, "kind": "no-carrier", "sent": len(candidates)}

    async def _failed(self, cabinet: Cabinet, exc: Exception, attempts: int) -> None:
        """Keep the failure's reason as the carrier's run of the sync (never hiding it)."""
        try:
            await self._runtime.store.runs.failed(
                cabinet.id, self._sync.name, reason=failure_reason(exc), attempts=attempts
            )
        except WbSyncError as record_exc:
            log.warning("could not record the failure of %s: %s", self._sync.name, record_exc)
