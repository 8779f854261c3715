"""Every Redis key name wbsync writes, built here and nowhere else.

All keys start with the configured prefix. Every key carries a Redis Cluster hash tag, so a
cluster keeps what one Lua call touches in one slot and spreads the rest over its masters: a
bucket's key is tagged ``{cabinet:group}``; a queue's BullMQ keys are tagged with the queue's
name (``<prefix>:q:{<queue>}:...``), so each queue lives in one slot and the nine queues spread.
"""

from __future__ import annotations

from wbsync.ratelimit.scope import BucketScope


def bucket_key(prefix: str, scope: BucketScope) -> str:
    """The key holding one (cabinet, limit group) bucket."""
    return f"{prefix}:rl:{{{scope.cabinet}:{scope.group}}}"


def queue_prefix(prefix: str) -> str:
    """The prefix BullMQ puts before its queue keys (``<prefix>:q:<queue>:...``)."""
    return f"{prefix}:q"


def bullmq_queue_name(queue: str) -> str:
    """The name BullMQ knows ``queue`` by: hash-tagged, so all of the queue's keys share a slot."""
    return f"{{{queue}}}"
