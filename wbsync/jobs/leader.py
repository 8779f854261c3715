"""One fan-out leader per queue across every process and host, by a lease in Redis.

Each process that runs a queue competes for that queue's lease (``lease.lua``: take it when
free, extend it when held, in one atomic pass). Only the holder fans the queue out; the others
poll and take over once a dead leader's lease expires, at most ``lease_ms`` plus one poll
(``lease_ms / 3``) after its last renewal. Leases are per queue so that processes split by
``--queues`` each lead the queues they run. The schedule (for each queue, the time up to which
the cabinets due have been enqueued, on Redis's clock) lives in Redis too, so a new leader, or a
restarted process, continues it instead of fanning out again at once.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from wbsync.observability.metrics import FANOUT_LEADER
from wbsync.redis import keys
from wbsync.redis.lua import lua_script
from wbsync.redis.redis_client import RedisClient, redis_failures

log = logging.getLogger(__name__)

_SCRIPT = lua_script("wbsync.jobs", "lease.lua")


def owner_id() -> str:
    """An id for this process that no other process on any host shares."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True, slots=True)
class Held:
    """The queues whose leases this process holds, and Redis's clock when it checked (ms)."""

    now_ms: int
    queues: tuple[str, ...]


class FanOutLeases:
    """The fan-out leases and the shared schedule of one deployment (its Redis prefix)."""

    def __init__(
        self, redis: RedisClient, *, prefix: str, lease_ms: int, owner: str | None = None
    ) -> None:
        if lease_ms < 1:
            raise ValueError(f"lease_ms must be >= 1, got {lease_ms}")
        self._redis = redis
        self._prefix = prefix
        self.lease_ms = lease_ms
        self.owner = owner or owner_id()
        self._script = redis.register_script(_SCRIPT)
        self._schedule = keys.fanout_schedule_key(prefix)

    @property
    def poll_s(self) -> float:
        """How often a leader extends its leases and a follower tries to take them."""
        return self.lease_ms / 3000.0

    async def hold(self, queues: Sequence[str]) -> Held:
        """Take or extend the leases of ``queues``; the ones this process holds now."""
        reply = await self._call(queues, self.lease_ms)
        held = tuple(q for q, flag in zip(queues, reply[1:], strict=True) if int(flag))
        for queue in queues:
            FANOUT_LEADER.labels(queue).set(1 if queue in held else 0)
        return Held(now_ms=int(reply[0]), queues=held)

    async def release(self, queues: Sequence[str]) -> None:
        """Give up the leases this process holds, so another process leads at once."""
        await self._call(queues, 0)
        for queue in queues:
            FANOUT_LEADER.labels(queue).set(0)

    async def through_ms(self, queues: Sequence[str]) -> dict[str, int | None]:
        """For each queue, the time (Redis clock, ms) up to which the cabinets due have been
        enqueued; None if it was never fanned out."""
        if not queues:
            return {}
        with redis_failures("fan-out schedule: Redis failed"):
            values = await self._redis.hmget(self._schedule, list(queues))
        return {q: None if v is None else int(v) for q, v in zip(queues, values, strict=True)}

    async def set_through_ms(self, through: Mapping[str, int]) -> None:
        """Record how far the queues were fanned out, for whichever process leads next."""
        if not through:
            return
        mapping: dict[Any, Any] = dict(through)
        with redis_failures("fan-out schedule: Redis failed"):
            await self._redis.hset(self._schedule, mapping=mapping)

    async def _call(self, queues: Sequence[str], lease_ms: int) -> list[int]:
        lease_keys = [keys.fanout_lease_key(self._prefix, q) for q in queues]
        with redis_failures("fan-out lease: Redis failed"):
            reply = await self._script(keys=lease_keys, args=[self.owner, lease_ms])
        return [int(x) for x in reply]
