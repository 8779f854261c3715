"""Which of WB's refusals no retry fixes, and what each applies to: the one place that decides.

WB's answers (docs/failures.md, "WB's answers and what each costs"):

* 401 "token problem; ..." (expired, revoked, malformed, missing): the token is dead, the whole
  cabinet is suspended (kind ``token``);
* 401 "token scope not allowed" (WB's status table: a category the token lacks): the section
  (``category``);
* 403 (the token's type may not call the method, access denied, a read-only token writing): the
  section (``token_type``);
* 402 (a paid service without balance): the section (``payment``);
* 400 whose words say this token may not ask this (``_REFUSED_400``): the section (``refused``).

Everything else is not for good: a 429, 5xx and transport failures stay transient, other 4xx
keep their cost (a BullMQ attempt), and WB's "method is disabled" and "path not found" 404s keep
their own handling.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from wbsync.errors import (
    WbApiError,
    WbAuthError,
    WbMethodDisabledError,
    WbPathNotFoundError,
    WbPaymentRequiredError,
    WbPermissionError,
    WbRequestError,
)

__all__ = ["Refusal", "refusal_for_good"]

_SCOPE = re.compile(r"scope|categor", re.IGNORECASE)
"""WB's words of a 401 for a category the token lacks ("token scope not allowed ...")."""

_REFUSED_400 = re.compile(
    r"token scope|not allowed for (this|the) (token|seller)|access denied|permission denied"
    r"|forbidden for (this|the) token|token (type|does not)",
    re.IGNORECASE,
)
"""WB's words of a 400 that says the token may not ask this (any other 400 is the request's)."""

_LIFTS = {
    "token": "a new token (wbsync cabinets token), wbsync cabinets resume, or a probe WB accepts",
    "category": "a token with the category (wbsync cabinets token), wbsync cabinets resume, "
    "or a probe WB accepts",
    "token_type": "a token of a type WB allows (wbsync cabinets token), wbsync cabinets resume, "
    "or a probe WB accepts",
    "payment": "money on the seller's WB balance, then wbsync cabinets resume or a probe",
    "refused": "a token that may ask it (wbsync cabinets token), wbsync cabinets resume, "
    "or a probe WB accepts",
    "expired": "a new token (wbsync cabinets token)",
}


@dataclass(frozen=True, slots=True)
class Refusal:
    """A refusal for good: its ``kind`` (``wbsync.store.suspensions.KINDS``), the ``section``
    it applies to (None: the whole cabinet), WB's words, the method and status."""

    kind: str
    section: str | None
    words: str | None
    method: str
    status: int | None

    @property
    def lifts(self) -> str:
        """What lifts it, for the operator."""
        return lifted_by(self.kind)


def lifted_by(kind: str) -> str:
    """What lifts a suspension of ``kind``."""
    return _LIFTS.get(kind, "wbsync cabinets resume")


def refusal_for_good(error: BaseException) -> Refusal | None:
    """The refusal ``error`` is when no retry can fix it; None for everything else."""
    if not isinstance(error, WbApiError):
        return None
    kind: str | None = None
    section = error.section
    words = error.words or ""
    if isinstance(error, WbAuthError):
        kind = "category" if _SCOPE.search(words) else "token"
    elif isinstance(error, WbPermissionError):
        kind = "token_type"
    elif isinstance(error, WbPaymentRequiredError):
        kind = "payment"
    elif (
        isinstance(error, WbRequestError)
        and not isinstance(error, WbMethodDisabledError | WbPathNotFoundError)
        and error.status == 400
        and _REFUSED_400.search(words)
    ):
        kind = "refused"
    if kind is None:
        return None
    if kind == "token" or section is None:
        section = None  # a dead token, or a refusal whose section the client did not name
    return Refusal(kind, section, error.words, error.method, error.status)
