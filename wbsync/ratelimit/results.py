"""What the limiter answers: one bucket pass's result, and a token ``acquire`` took."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Acquired", "TryResult"]


@dataclass(frozen=True, slots=True)
class TryResult:
    """The outcome of one bucket pass: acquired, or how long until a token is there."""

    acquired: bool
    remaining: int
    wait_ms: int
    blocking: int = 0  # of the buckets passed, the one that needs the longest wait


@dataclass(frozen=True, slots=True)
class Acquired:
    """A token taken by ``acquire``, and how long the caller slept for it.

    ``taken_at`` (``clock.monotonic()`` seconds) is the start of the pass that took it: no
    later than the token was taken. ``ready_at`` is no later than the moment it could first be
    taken: ``taken_at``, or, when the caller slept for it, when the pass before said it would
    be there (a loaded event loop wakes a sleeper late, and the bucket stays idle meanwhile).
    So the previous token was taken no later than one interval before ``ready_at``, and a
    request that ran into WB's limit can tell how long after that it reached WB, at most
    (``Feedback.on_429``).
    """

    remaining: int
    waited_ms: float
    taken_at: float
    ready_at: float
