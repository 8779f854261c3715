"""Every Redis key name wbsync writes, built here and nowhere else.

All keys start with the configured prefix. Every key carries a Redis Cluster hash tag, so a
cluster keeps what one Lua call touches in one slot and spreads the rest over its masters: a
bucket's key is tagged ``{cabinet:group}``; a queue's BullMQ keys are tagged with the queue's
name (``<prefix>:q:{<queue>}:...``), so each queue lives in one slot and the queues spread;
the fan-out's leases and schedule share the tag ``{fanout}``, so one Lua call checks them all.
"""

from __future__ import annotations

import base64

from wbsync.values.scope import BucketScope


def bucket_key(prefix: str, scope: BucketScope) -> str:
    """The key holding one (cabinet, limit group) bucket."""
    return bucket_key_of(prefix, scope.cabinet, scope.group)


def bucket_key_of(prefix: str, cabinet: str, group: str) -> str:
    """``bucket_key`` by the cabinet's and the group's names."""
    return f"{prefix}:rl:{{{cabinet}}}:{group}"


def learned_key(prefix: str, scope: BucketScope) -> str:
    """The key holding the limit learned from WB's replies for one bucket (same hash tag)."""
    return f"{prefix}:rl-learned:{{{scope.cabinet}}}:{scope.group}"


def penalty_key(prefix: str, cabinet: str, group: str) -> str:
    """The hash recording WB's penalty on one bucket (same hash tag): ``until_ms`` (Redis
    clock) and ``words`` (what WB said); it expires when the penalty lifts."""
    return f"{prefix}:rl-penalty:{{{cabinet}}}:{group}"


def learn_evidence_key(prefix: str, scope: BucketScope) -> str:
    """The key marking a recent 429 on one bucket that did not prove WB stricter on its own
    (same hash tag): a second one while it lives does."""
    return f"{prefix}:rl-429:{{{scope.cabinet}}}:{scope.group}"


def limiter_seen_key(prefix: str, cabinet: str) -> str:
    """The hash of the WB limiter ids that answered the seller's 429s, each with the limit
    group it limited (``-`` once it limited two): a limiter seen on two groups is the
    seller's global one."""
    return f"{prefix}:rl-limiters:{{{cabinet}}}"


def learned_index_key(prefix: str) -> str:
    """The sorted set of the buckets with a learned limit (``<cabinet>:<group>``, scored by
    when it expires, ms): the status finds them without scanning the keyspace."""
    return f"{prefix}:{{rl-learned}}:index"


def penalty_index_key(prefix: str) -> str:
    """The sorted set of the penalised buckets (``<cabinet>:<group>``, scored by when the
    penalty lifts, epoch ms): every process and the status find them without a scan."""
    return f"{prefix}:{{rl-penalties}}:index"


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
