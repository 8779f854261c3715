"""Change notifications: one ``XADD`` on a capped Redis stream per committed page that changed rows.

The stream (``keys.change_stream_key``) is a doorbell, not the data: each entry names the
dataset, the cabinet, how many rows the page changed and the numbers it announces (the page's
changes are numbered ``first_seq..last_seq``, with gaps; ``prev_seq`` is the dataset's last number
before the page, the ``last_seq`` of its previous event); a consumer reads the rows from the change
feed (API, ``Store.changes``, ``wbsync export``) after the sequence number it last read. The
stream is capped (``MAXLEN ~ change_stream_maxlen``), and a notification that Redis refuses is
logged and dropped: the rows are already committed. A consumer sees that it missed events (a
``prev_seq`` past its cursor) and catches up from its own cursors (docs/data.md, "Gaps and
catching up"). Each entry also carries ``stream_seq``, its number in the stream (one more than
the entry's before it, ``keys.change_count_key``): a reader that sees the number jump missed
entries, whichever dataset's, so a dataset that went quiet is caught up too.

A sync job's page sends its event in the script call that saves the job's cursor (one round trip
for both, ``wbsync.composition.workers``), with this class's key, ``fields``, ``counter`` and
cap; on a Redis Cluster the stream's slot is not the queue's, and the event goes by ``publish``.
"""

from __future__ import annotations

import logging

from wbsync.errors import RedisUnavailableError
from wbsync.redis import keys
from wbsync.redis.lua import lua_script
from wbsync.redis.redis_client import RedisClient, redis_failures
from wbsync.store.changes import ChangeEvent

__all__ = ["STREAM_SEQ_FIELD", "ChangeStream"]

#: The entry field that carries the entry's number in the stream.
STREAM_SEQ_FIELD = "stream_seq"

_SCRIPT = lua_script("wbsync.shared", "change_stream.lua")

log = logging.getLogger(__name__)


class ChangeStream:
    """Publishes :class:`ChangeEvent`s to the deployment's change stream (no I/O at init)."""

    def __init__(self, redis: RedisClient, *, prefix: str, maxlen: int) -> None:
        if maxlen < 1:
            raise ValueError(f"maxlen must be >= 1, got {maxlen}")
        self._redis = redis
        self._script = redis.register_script(_SCRIPT)
        self.key = keys.change_stream_key(prefix)
        self.counter = (keys.change_count_key(prefix), STREAM_SEQ_FIELD)
        """The key that numbers the entries, and the field that carries the number."""
        self.maxlen = maxlen

    @staticmethod
    def fields(event: ChangeEvent) -> dict[str, str | int]:
        """The stream entry's fields for ``event``."""
        return {
            "dataset": event.dataset,
            "cabinet": event.cabinet_id,
            "rows": event.rows,
            "last_seq": event.last_seq,
            "first_seq": event.prev_seq + 1,
            "prev_seq": event.prev_seq,
        }

    async def publish(self, event: ChangeEvent) -> None:
        """``XADD`` one numbered entry for ``event``; a Redis failure is logged, never raised."""
        args: list[str | int] = [self.maxlen, STREAM_SEQ_FIELD]
        for name, value in self.fields(event).items():
            args += [name, value]
        try:
            with redis_failures("Redis failed"):
                # Approximate trimming (~) lets Redis drop whole nodes: O(1), not O(trimmed).
                await self._script(keys=[self.key, self.counter[0]], args=args)
        except RedisUnavailableError as exc:
            log.warning(
                "change stream: could not notify %s (cabinet %d, up to seq %d): %s",
                event.dataset,
                event.cabinet_id,
                event.last_seq,
                exc,
            )
