"""The one place that tells refusals no retry fixes from the rest, and what each applies to."""

from __future__ import annotations

import pytest

from wbsync.errors import (
    FailureBudgetExhausted,
    TokenError,
    WbApiError,
    WbAuthError,
    WbMethodDisabledError,
    WbPaymentRequiredError,
    WbPermissionError,
    WbRateLimitedError,
    WbRequestError,
    WbServerError,
    WbTransportError,
)
from wbsync.wb.refusals import refusal_for_good


def _error(kind: type[WbApiError], status: int | None, words: str | None) -> WbApiError:
    error = kind("WB refused the request", method="statistics.sales", status=status, words=words)
    error.section = "statistics"
    return error


@pytest.mark.parametrize(
    ("kind", "status", "words", "expected"),
    [
        (WbAuthError, 401, "unauthorized: token problem; token is expired", ("token", None)),
        (WbAuthError, 401, "unauthorized: token problem; token is revoked", ("token", None)),
        (WbAuthError, 401, None, ("token", None)),
        (
            WbAuthError,
            401,
            "unauthorized: token problem; token scope not allowed for this path",
            ("category", "statistics"),
        ),
        (
            WbPermissionError,
            403,
            "forbidden: Access denied: token does not satisfy the method's requirements",
            ("token_type", "statistics"),
        ),
        (WbPaymentRequiredError, 402, "payment required", ("payment", "statistics")),
        (WbRequestError, 400, "token type not allowed for this seller", ("refused", "statistics")),
        (WbRequestError, 400, "Access denied", ("refused", "statistics")),
    ],
)
def test_refusals_for_good_and_what_they_apply_to(
    kind: type[WbApiError], status: int, words: str | None, expected: tuple[str, str | None]
) -> None:
    refusal = refusal_for_good(_error(kind, status, words))
    assert refusal is not None
    assert (refusal.kind, refusal.section) == expected
    assert (refusal.words, refusal.status, refusal.method) == (words, status, "statistics.sales")
    assert refusal.lifts


@pytest.mark.parametrize(
    "error",
    [
        _error(WbRequestError, 400, "invalid start day"),
        _error(WbRequestError, 422, None),
        _error(WbMethodDisabledError, 404, "method is disabled"),
        _error(WbServerError, 502, "bad gateway"),
        _error(WbTransportError, None, None),
        _error(WbRateLimitedError, 429, "too many requests"),
        FailureBudgetExhausted(8, _error(WbServerError, 503, None)),
        TokenError("malformed WB token"),
        ValueError("a bug"),
    ],
)
def test_everything_else_is_not_for_good(error: BaseException) -> None:
    assert refusal_for_good(error) is None


def test_a_refusal_without_a_section_suspends_the_whole_cabinet() -> None:
    error = WbPermissionError("WB refused", method="x", status=403, words="forbidden")
    refusal = refusal_for_good(error)
    assert refusal is not None and (refusal.kind, refusal.section) == ("token_type", None)
