"""What WB's rate-limit headers say about its real bucket, and what the shared bucket learns.

WB answers every request with ``X-Ratelimit-Remaining`` (tokens left after it), and a 429 with
``X-Ratelimit-Retry`` (seconds until a retry can succeed), ``X-Ratelimit-Limit`` (the burst)
and ``X-Ratelimit-Reset`` (seconds until the bucket is full). Our table is a ceiling: when
those show a stricter bucket than the table, the shared bucket of that (seller, group) learns
it for every process (``RateLimiter.learn``), until the learned limit expires or WB shows more
room than it allows. A looser WB changes nothing.

Reading a 429 as a token bucket of ``B`` tokens holding ``t`` (< 1) tokens, one per ``I``
seconds: Retry = (1 - t) I and Reset = (B - t) I, so I = (Reset - Retry) / (B - 1) when B > 1.
When B = 1 they are equal and only bound I from below. But WB's bucket held t <= 0 tokens
after the request it let through before, so I <= Retry + the time between the two arrivals,
and that time is at most how long after the previous token was taken this request reached WB.
Our bucket gave the previous token one interval of ours before this one was ready, and this
request reached WB before its reply came back: so WB's interval is at most ours plus Retry plus
the time from our token being ready to the reply. That time counts the wait for a token
already there (a loaded event loop wakes a sleeper late; the bucket idles meanwhile) and the
wait before the request left, not only its round trip: on a busy machine they are tens of ms,
and an estimate without them comes out shorter than WB's interval, which costs another 429.
With them the estimate errs long (a little slower until the learned limit expires). One case
stays short: a token that sat in a full bucket before the request came for it was given more
than one interval after the previous one, by a time the bucket does not keep; then the next
429, at the learned rate, tightens again (below).

A 429 is evidence only when our own timing cannot explain it: a smaller burst, a
(Reset - Retry) / (B - 1) or a Retry longer than our interval by ``EVIDENCE_MARGIN``. A Retry
within our interval is what a request reaching WB early looks like (a busy event loop, a healed
network delivering requests together); it teaches only when another follows within
``LEARN_REPEAT_INTERVALS`` of our intervals, or when the bucket already follows a learned limit
(WB was shown stricter than the table; a 429 at the learned rate shows it stricter still).
A 429 of a request that took its token before the last tightening was sent at the replaced
rate: it adds nothing on top (``RateLimiter.learn``). Wait headers are bounded
(``RateHeaders``).
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

from wbsync.ratelimit import Acquired, BucketScope, RateLimiter
from wbsync.system import clock

__all__ = [
    "EVIDENCE_MARGIN",
    "GLOBAL_WORDS",
    "LEARN_REPEAT_INTERVALS",
    "Feedback",
    "RateHeaders",
    "limiter_of",
]

log = logging.getLogger(__name__)

# WB's Remaining is whole tokens, ours too; a bucket refilling between the two readings or a
# request counted a moment apart makes them differ by one without either bucket being wrong.
_ROUNDING = 1

#: A 429 proves WB stricter on its own only when its headers show a wait longer than our own
#: bucket's interval by this share: shorter ones are what our timing explains (a request that
#: reached WB early: a busy loop, a healed network delivering requests together).
EVIDENCE_MARGIN = 0.1
#: A 429 our timing could explain teaches nothing alone; a second one within this many of the
#: bucket's (scaled) intervals does: jitter does not repeat, a stricter WB does.
LEARN_REPEAT_INTERVALS = 10

#: A 429 whose words (problem+json ``title``, ``detail`` or ``origin``) hold this (any case)
#: came from WB's global limiter of the seller, not the method's.
GLOBAL_WORDS = "global"
#: WB's problem+json names the limiter that refused: ``"detail": "limited by <uuid>"``.
_LIMITED_BY = re.compile(r"limited by ([0-9A-Za-z-]{8,64})")

#: The headers that tell how long to wait, in the order they are read.
WAIT_HEADERS = ("X-Ratelimit-Retry", "Retry-After", "X-Ratelimit-Reset")


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


def _wait_s(header: str, value: str) -> float | None:
    """Seconds a wait header asks for; None when it is not a usable number (or date)."""
    number = _number(value.strip())
    if number is None and header == "Retry-After" and not _is_number_like(value):
        try:  # RFC 9110: Retry-After may be an HTTP date
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None
        return max(0.0, when.timestamp() - clock.now_ms() / 1000.0)
    return number


def _is_number_like(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class RateHeaders:
    """WB's rate-limit headers of one reply (seconds are real, of the scaled world).

    A wait WB asks for is kept as it is up to ``max_wait_s``; a finite one past it is clamped
    to it (named in ``clamped``), never shortened further. A wait header that is no usable
    number (non-numeric, negative, NaN, infinite) is read as absent and named in ``rejected``.
    Each is logged once (a WARNING naming the method and the header). A reply with a rejected
    or clamped header teaches nothing about WB's rate.
    """

    remaining: int | None
    limit: int | None
    retry_s: float | None
    reset_s: float | None
    rejected: tuple[str, ...] = ()
    clamped: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        h: Mapping[str, str],
        *,
        method: str = "?",
        cabinet: str = "?",
        max_wait_s: float = math.inf,
    ) -> RateHeaders:
        """Read the headers ``h`` (case-insensitive, as a reply's are); a missing or unusable
        one is None, a wait past ``max_wait_s`` is ``max_wait_s``."""
        remaining = _number(h.get("X-Ratelimit-Remaining"))
        limit = _number(h.get("X-Ratelimit-Limit"))
        waits: dict[str, float | None] = {}
        rejected: list[str] = []
        clamped: list[str] = []
        for header in WAIT_HEADERS:
            raw = h.get(header)
            seconds = None if raw is None else _wait_s(header, raw)
            if raw is not None and seconds is None:
                rejected.append(header)
                log.warning(
                    "cabinet %s: %s: WB's %s header %r is not a usable wait; read as absent",
                    cabinet,
                    method,
                    header,
                    raw[:40],
                )
            elif seconds is not None and seconds > max_wait_s:
                clamped.append(header)
                log.warning(
                    "cabinet %s: %s: WB's %s header asks %g s, past WBSYNC_WB_RATE_WAIT_MAX_S; "
                    "waiting %g s",
                    cabinet,
                    method,
                    header,
                    seconds,
                    max_wait_s,
                )
                seconds = max_wait_s
            waits[header] = seconds
        retry = waits["X-Ratelimit-Retry"]
        return cls(
            remaining=int(remaining) if remaining is not None and remaining < 2**31 else None,
            limit=int(limit) if limit is not None and 1 <= limit < 2**31 else None,
            retry_s=retry if retry is not None else waits["Retry-After"],
            reset_s=waits["X-Ratelimit-Reset"],
            rejected=tuple(rejected),
            clamped=tuple(clamped),
        )

    @property
    def wait_s(self) -> float | None:
        """How long a 429 asks to wait: Retry (or Retry-After), else Reset; None if neither."""
        return self.retry_s if self.retry_s is not None else self.reset_s


def names_global_limiter(body: object) -> bool:
    """True when a 429's body says WB's global limiter refused (``GLOBAL_WORDS``)."""
    if not isinstance(body, dict):
        return False
    said = (body.get(field) for field in ("title", "detail", "origin"))
    return any(isinstance(s, str) and GLOBAL_WORDS in s.casefold() for s in said)


def limiter_of(words: str | None) -> str | None:
    """The id of the limiter a 429's words name ("limited by <id>"), if any."""
    found = _LIMITED_BY.search(words or "")
    return found.group(1) if found else None


class Feedback:
    """Turns WB's headers into the shared bucket's learned limit, level or relaxation."""

    def __init__(self, limiter: RateLimiter, *, cabinet: str) -> None:
        self._limiter = limiter
        self._cabinet = cabinet

    async def is_global(self, scope: BucketScope, body: object, words: str | None) -> bool:
        """Whether a 429 on ``scope`` came from the seller's global limiter: its words say so,
        or the limiter it names has already refused another group of the seller."""
        if names_global_limiter(body):
            return True
        limiter_id = limiter_of(words)
        return limiter_id is not None and await self._limiter.limits_another_group(
            scope, limiter_id
        )

    async def on_429(
        self, scope: BucketScope, headers: RateHeaders, acquired: Acquired, replied_at: float
    ) -> None:
        """A 429 of a request that took ``acquired`` and got its reply at ``replied_at``
        (``clock.monotonic()``): WB's bucket may be stricter than ours; learn it when the
        headers prove it, the 429 repeats, or a learned limit is already in force."""
        if headers.rejected or headers.clamped:
            # Headers we could not read are no evidence of anything; a wait past our cap is a
            # penalty, not a rate.
            return
        interval_s = scope.limit.interval_ms * self._limiter.time_scale / 1000.0
        burst = headers.limit or scope.limit.burst
        retry, reset = headers.retry_s or 0.0, headers.reset_s or 0.0
        seen_s = extra_s = 0.0
        if burst > 1:
            seen_s = (reset - retry) / (burst - 1) if reset > retry else 0.0
        else:
            # From our token being ready to the reply: at least how much later than one
            # interval of ours after the previous request this one reached WB.
            seen_s, extra_s = reset, retry + max(0.0, replied_at - acquired.ready_at)
        # (Reset - Retry) / (burst - 1) and a smaller burst do not depend on when the request
        # arrived; a Retry within our own interval does (a request that reached WB early).
        proven = (
            (headers.limit is not None and headers.limit < scope.limit.burst)
            or (burst > 1 and seen_s > interval_s * (1 + EVIDENCE_MARGIN))
            or retry > interval_s * (1 + EVIDENCE_MARGIN)
        )
        window_ms = LEARN_REPEAT_INTERVALS * interval_s * 1000.0
        if (
            not proven
            and not await self._limiter.seen_again(scope, window_ms=window_ms)
            and await self._limiter.learned(scope) is None
        ):
            log.info(
                "cabinet %s: a 429 on %s our timing may explain; learning only if it repeats "
                "within %.0f ms",
                self._cabinet,
                scope.group,
                window_ms,
            )
            return
        taken_ago_ms = (clock.monotonic() - acquired.taken_at) * 1000.0
        learned = await self._limiter.learn(
            scope,
            seen_ms=seen_s * 1000.0,
            extra_ms=extra_s * 1000.0,
            burst=headers.limit or 0,
            taken_ago_ms=taken_ago_ms,
        )
        if learned is not None:
            log.warning(
                "cabinet %s: WB's limit for %s is stricter than the table: 1 request per "
                "%.0f ms, burst %d; following it for %.0f s",
                self._cabinet,
                scope.group,
                learned.interval_ms,
                learned.burst,
                learned.expires_in_ms / 1000.0,
            )

    async def on_reply(self, scope: BucketScope, headers: RateHeaders, acquired: Acquired) -> None:
        """Any other reply: align our bucket with WB's ``Remaining`` when they disagree."""
        theirs, ours = headers.remaining, acquired.remaining
        if theirs is None:
            return
        if theirs + _ROUNDING < ours:
            # WB's bucket is clearly emptier (another client on the seller, a smaller bucket):
            # hold what it shows, so the next burst does not run into 429s.
            await self._limiter.level(scope, theirs)
        elif theirs > ours + _ROUNDING and await self._limiter.forget(scope):
            # WB has more room than our bucket: a learned limit (if any) was too strict.
            log.info(
                "cabinet %s: WB shows more room for %s than the learned limit; table again",
                self._cabinet,
                scope.group,
            )
