"""Every Redis key name wbsync writes, built here and nowhere else.

All keys start with the configured prefix. Every key carries a Redis Cluster hash tag, so a
cluster keeps what one Lua call touches in one slot and spreads the rest over its masters: a
bucket's key is tagged ``{cabinet:group}``; a queue's BullMQ keys are tagged with the queue's
name (``<prefix>:q:{<queue>}:...``), so each queue lives in one slot and the nine queues spread;
the fan-out's leases and schedule share the tag ``{fanout}``, so one Lua call checks them all.
"""

from __future__ import annotations

import base64

from wbsync.scope import BucketScope


def bucket_key(prefix: str, scope: BucketScope) -> str:
    """The key holding one (cabinet, limit group) bucket."""
    return f"{prefix}:rl:{{{scope.cabinet}:{scope.group}}}"


def learned_key(prefix: str, scope: BucketScope) -> str:
    """The key holding the limit learned from WB's replies for one bucket (same hash tag)."""
    return f"{prefix}:rl-learned:{{{scope.cabinet}:{scope.group}}}"


def learn_evidence_key(prefix: str, scope: BucketScope) -> str:
    """The key marking a recent 429 on one bucket that did not prove WB stricter on its own
    (same hash tag): a second one while it lives does."""
    return f"{prefix}:rl-429:{{{scope.cabinet}:{scope.group}}}"


def learned_index_key(prefix: str) -> str:
    """The sorted set of the buckets with a learned limit (``<cabinet>:<group>``, scored by
    when it expires, ms): the status finds them without scanning the keyspace."""
    return f"{prefix}:{{rl-learned}}:index"


def queue_prefix(prefix: str) -> str:
    """The prefix BullMQ puts before its queue keys (``<prefix>:q:<queue>:...``)."""
    return f"{prefix}:q"


def bullmq_queue_name(queue: str) -> str:
    """The name BullMQ knows ``queue`` by: hash-tagged, so all of the queue's keys share a slot."""
    return f"{{{queue}}}"


def bullmq_worker_connection_name(queue_prefix: str, queue: str) -> str:
    """The client name of a worker's blocking connection, as Node BullMQ names its own.

    ``<queue prefix>:<base64 of the BullMQ queue name>``: Node's ``getWorkers()`` /
    ``getWorkersCount()`` and the dashboards built on them (Bull Board) find a queue's workers by
    this name in ``CLIENT LIST``. (Not a key; it lives here beside the queue name it encodes.)
    """
    encoded = base64.b64encode(bullmq_queue_name(queue).encode()).decode("ascii")
    return f"{queue_prefix}:{encoded}"


def throughput_key(prefix: str, queue: str, minute: int) -> str:
    """The key counting one queue's pages and 429s in one wall-clock minute (epoch minutes)."""
    return f"{prefix}:tp:{{{queue}}}:{minute}"


def lag_key(prefix: str, queue: str) -> str:
    """The list of one queue's recent sync lags (``<started ms>:<lag ms>``, newest first)."""
    return f"{prefix}:lag:{{{queue}}}"


def fanout_lease_key(prefix: str, queue: str) -> str:
    """The key holding the id of the process that leads ``queue``'s fan-out."""
    return f"{prefix}:{{fanout}}:lease:{queue}"


def fanout_schedule_key(prefix: str) -> str:
    """The hash of the time (Redis clock, ms) up to which each queue's cabinets due have been
    enqueued, shared by every leader."""
    return f"{prefix}:{{fanout}}:through"


def change_stream_key(prefix: str) -> str:
    """The capped stream of change-feed events: one entry per committed page that changed rows
    (fields ``dataset``, ``cabinet``, ``rows``, ``last_seq``, ``first_seq``, ``prev_seq``,
    ``stream_seq``)."""
    return f"{prefix}:{{changes}}:stream"


def change_count_key(prefix: str) -> str:
    """The number of the change stream's last entry (each entry's ``stream_seq``; the stream's
    hash tag, so a script writes both)."""
    return f"{prefix}:{{changes}}:count"
