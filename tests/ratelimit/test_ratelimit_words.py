"""The one cleaning of WB's text (the client's words and the limiter's penalty records): one
line, control characters out, tokens masked, bounded."""

from __future__ import annotations

from wbsync.ratelimit.words import MASK, WORDS_MAX_CHARS, clean_words

JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzaWQiOiIxMjMiLCJleHAiOjF9.c2lnbmF0dXJlLW9mLXRoZS10b2tlbg"


def test_nothing_to_say_is_none() -> None:
    assert clean_words(None) is None
    assert clean_words("") is None
    assert clean_words(" \x00\n\u200b ") is None


def test_tokens_are_masked_and_ids_kept() -> None:
    for raw in (
        f"token problem; token {JWT} expired",
        f"Authorization: Bearer {JWT}",
        "bearer abc-def-secret-value rejected",
    ):
        words = clean_words(raw)
        assert words is not None and MASK in words
        assert JWT not in words and "secret-value" not in words and "c2lnbmF0dXJl" not in words
    # Host names and WB's ids are not tokens.
    kept = "see https://dev.wildberries.ru/openapi limited by 3f2a9e0c-0b1d-4c5e-9f00-1a2b3c4d5e6f"
    assert clean_words(kept) == kept


def test_control_characters_go_and_whitespace_collapses() -> None:
    raw = "bad\x00 request\x1b[31m\u200b here\r\n\r\nnow\u202e"
    assert clean_words(raw) == "bad request[31m here now"
    assert clean_words("limited by\x00 abc\n\tdef \x1b[31m") == "limited by abc def [31m"


def test_words_past_the_maximum_are_cut_with_an_ellipsis() -> None:
    fits = "x" * WORDS_MAX_CHARS
    assert clean_words(fits) == fits
    cut = clean_words("y" * (WORDS_MAX_CHARS + 1))
    assert cut is not None and len(cut) == WORDS_MAX_CHARS and cut.endswith("…")
    # A token at the edge is masked before the cut: no part of it survives.
    edge = clean_words("z " * (WORDS_MAX_CHARS // 2 - 10) + JWT)
    assert edge is not None and len(edge) <= WORDS_MAX_CHARS and "eyJzaWQi" not in edge
