"""Every Redis key name wbsync writes, built here and nowhere else.

All keys start with the configured prefix. A bucket's key carries a Redis Cluster hash tag
(``{cabinet:group}``) so a cluster keeps everything of one bucket in one slot.
"""

from __future__ import annotations

from wbsync.ratelimit.scope import BucketScope


def bucket_key(prefix: str, scope: BucketScope) -> str:
    """The key holding one (cabinet, limit group) bucket."""
    return f"{prefix}:rl:{{{scope.cabinet}:{scope.group}}}"


def queue_prefix(prefix: str) -> str:
    """The prefix BullMQ puts before its queue keys (``<prefix>:q:<queue>:...``)."""
    return f"{prefix}:q"
