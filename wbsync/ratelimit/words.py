"""WB's words made safe to show anywhere: one line, tokens masked, bounded.

One function cleans every text WB wrote before it is kept or shown: the client's errors and
run records (``wbsync.wb.words`` reads the words out of each reply shape first) and the
limiter's penalty records. It lives here, below the client, so the limiter uses it too.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["MASK", "WORDS_MAX_CHARS", "clean_words"]

#: The most characters of WB's words kept (an ellipsis marks a cut): enough for any message WB
#: writes (a problem+json ``detail``, "limited by <uuid>", a sentence), not enough for a page
#: of HTML or a body of data echoed back.
WORDS_MAX_CHARS = 300
#: What stands where a token was.
MASK = "[masked]"

_ELLIPSIS = "…"
# A JWT (WB's tokens are JWTs): three base64url parts; WB's own ids (UUIDs) have no dots, and
# host names have short labels, so neither is taken for one.
_JWT = re.compile(r"[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")
_BEARER = re.compile(r"(?i)\b(bearer|authorization:?)\s+[^\s,;\"']+")
_SPACE = re.compile(r"\s+")


def clean_words(raw: str | None) -> str | None:
    """``raw`` as one safe line: control characters out, whitespace collapsed, tokens masked,
    at most ``WORDS_MAX_CHARS`` characters (an ellipsis marks a cut); None when nothing is
    left."""
    if not raw:
        return None
    text = _SPACE.sub(" ", raw)
    text = "".join(ch for ch in text if unicodedata.category(ch) not in ("Cc", "Cf", "Cs"))
    text = _SPACE.sub(" ", text).strip()
    # Masked before the cut, so no part of a token survives at the edge.
    text = _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", _JWT.sub(MASK, text))
    if len(text) > WORDS_MAX_CHARS:
        text = text[: WORDS_MAX_CHARS - len(_ELLIPSIS)].rstrip() + _ELLIPSIS
    return text or None
