"""WB's penalties as the limiter records them: what a 429 said, and when the bucket is free.

A penalty pushes a bucket's next token to when WB said a retry may succeed (``bucket.lua``),
and leaves a record beside the bucket (``until_ms`` on the Redis clock, WB's words) that
expires when it lifts, plus an entry in an index of penalised buckets, so every process and
the status page see it without a scan.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

__all__ = ["GLOBAL_GROUP", "MAX_WORDS_CHARS", "Penalty", "bounded_words"]

#: The group name of a seller's global bucket: WB's per-seller limiter above the method
#: groups. No method group is named so (a test checks the table).
GLOBAL_GROUP = "seller"

#: The most characters of WB's words a penalty record keeps: enough for a problem+json
#: ``detail`` ("limited by <uuid>") or a sentence, not a whole HTML error page.
MAX_WORDS_CHARS = 300

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200b-\u200f\u202a-\u202e]+")


@dataclass(frozen=True, slots=True)
class Penalty:
    """A penalty WB gave a bucket, in force now."""

    seller: str  # WB seller id (BucketScope.cabinet)
    group: str  # the limit group, or GLOBAL_GROUP for the seller's global limiter
    until_ms: float  # epoch ms (Redis clock) when it lifts
    remaining_ms: int
    words: str | None  # what WB said, bounded and sanitised; None if nothing


def bounded_words(text: str | None) -> str | None:
    """``text`` without control characters (runs become one space), trimmed, at most
    ``MAX_WORDS_CHARS`` characters (cut with an ellipsis); None when nothing is left."""
    if not text:
        return None
    clean = " ".join(_CONTROL.sub(" ", text).split())
    if len(clean) > MAX_WORDS_CHARS:
        clean = clean[: MAX_WORDS_CHARS - 1] + "…"
    return clean or None


def penalty_of(member: str, until_ms: float, now_ms: float, words: str | None) -> Penalty:
    """The ``Penalty`` of an index member (``<seller>:<group>``) and its record."""
    seller, _, group = member.rpartition(":")
    remaining = max(0, math.ceil(until_ms - now_ms))
    return Penalty(seller, group, until_ms, remaining, words or None)
