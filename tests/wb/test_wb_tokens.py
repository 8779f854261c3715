"""Token parsing, minting and endpoint descriptors: no network, no Redis."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from wbsync.config import Settings
from wbsync.errors import TokenError
from wbsync.shared.runtime import wb_hosts
from wbsync.syncs.finance import FINANCE_DETAILED_REPORT
from wbsync.syncs.inventory import ANALYTICS_STOCKS_WB_WAREHOUSES
from wbsync.syncs.pricing import PRICES_UPLOAD_TASK
from wbsync.syncs.sections import STATISTICS_SALES
from wbsync.values.scope import Limit
from wbsync.wb import endpoints as eps
from wbsync.wb.methods import CONTENT_CARDS_LIST, PRICES_GOODS_LIST, TARIFFS_ACCEPTANCE_COEFFICIENTS
from wbsync.wb.tokens import (
    PARSED_MAX,
    Category,
    TokenType,
    _parsed,
    mint_token,
    parse_token,
    verify_token,
)

KEY = "wbsync-test-key-0123456789abcdef0123456789"
SELLER = "3f2c1a7e-8b9d-4c6e-a1f0-123456789abc"


def _b64(obj: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def test_mint_then_parse_round_trips_claims() -> None:
    raw = mint_token(
        key=KEY,
        seller_id=SELLER,
        token_type=TokenType.SERVICE,
        categories=[Category.FINANCE, Category.PRICES],
    )
    token = parse_token(raw, cabinet="shop")
    assert token.seller_id == SELLER
    assert token.type is TokenType.SERVICE
    assert token.categories == {Category.FINANCE, Category.PRICES}
    assert token.authorization() == raw
    assert verify_token(raw, KEY).seller_id == SELLER


def test_bitmask_uses_one_shifted_by_bit_number() -> None:
    raw = mint_token(key=KEY, seller_id=SELLER, categories=[Category.CONTENT, Category.FINANCE])
    payload = json.loads(base64.urlsafe_b64decode(raw.split(".")[1] + "=="))
    assert payload["s"] == (1 << 1) | (1 << 13)
    assert payload["acc"] == 3


def test_repr_and_str_never_show_the_token() -> None:
    raw = mint_token(key=KEY, seller_id=SELLER, categories=[Category.STATISTICS])
    token = parse_token(raw)
    for text in (repr(token), str(token), f"{token}"):
        assert raw not in text
        assert raw.split(".")[2] not in text
        assert "type=personal" in text and "statistics" in text


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "not-a-jwt",
        "a.b.c",
        _b64({"alg": "HS256"}) + "." + _b64({"sid": "nope", "acc": 3, "s": 0, "exp": 2**40}) + ".x",
        _b64({"alg": "HS256"}) + "." + _b64({"sid": SELLER, "acc": 7, "s": 0, "exp": 2**40}) + ".x",
        _b64({"alg": "HS256"}) + "." + _b64({"sid": SELLER, "acc": 3, "exp": 2**40}) + ".x",
    ],
)
def test_malformed_tokens_raise_token_error_naming_the_cabinet(raw: str) -> None:
    with pytest.raises(TokenError) as info:
        parse_token(raw, cabinet="shop-1")
    assert "shop-1" in str(info.value)
    if raw:
        assert raw not in str(info.value)


def test_a_malformed_token_is_refused_at_every_parse_naming_each_cabinet() -> None:
    raw = _b64({"alg": "HS256"}) + "." + _b64({"sid": SELLER, "acc": 7, "exp": 2**40}) + ".x"
    for cabinet in ("shop-1", "shop-2"):
        with pytest.raises(TokenError, match=cabinet):
            parse_token(raw, cabinet=cabinet)


def test_a_kept_token_is_still_checked_for_expiry_and_the_kept_ones_are_bounded() -> None:
    now = datetime.now(UTC)
    raw = mint_token(key=KEY, seller_id=SELLER, lifetime=timedelta(hours=1), now=now)
    assert parse_token(raw, now=now) is parse_token(" Bearer " + raw, now=now)  # read once
    with pytest.raises(TokenError, match="expired"):
        parse_token(raw, now=now + timedelta(hours=2))
    for _ in range(PARSED_MAX + 10):
        parse_token(mint_token(key=KEY, seller_id=SELLER, token_id=str(uuid.uuid4())))
    kept = _parsed.cache_info()
    assert kept.maxsize == PARSED_MAX and kept.currsize == PARSED_MAX


def test_expired_token_is_rejected() -> None:
    raw = mint_token(key=KEY, seller_id=SELLER, lifetime=timedelta(seconds=-1))
    with pytest.raises(TokenError, match="expired"):
        parse_token(raw, cabinet="c")
    with pytest.raises(TokenError, match="expired"):
        verify_token(raw, KEY)


def test_verify_rejects_a_foreign_key() -> None:
    raw = mint_token(key="someone-else-entirely-0123456789abcdef0123", seller_id=SELLER)
    with pytest.raises(TokenError, match="signature"):
        verify_token(raw, KEY)


def test_check_token_names_missing_category_and_cabinet() -> None:
    token = parse_token(mint_token(key=KEY, seller_id=SELLER, categories=[Category.CONTENT]))
    with pytest.raises(TokenError) as info:
        eps.check_token(token, FINANCE_DETAILED_REPORT, cabinet="shop-2")
    assert "finance" in str(info.value) and "shop-2" in str(info.value)
    eps.check_token(token, CONTENT_CARDS_LIST, cabinet="shop-2")
    eps.check_token(token, TARIFFS_ACCEPTANCE_COEFFICIENTS)  # any category


def test_read_only_tokens_cannot_write() -> None:
    raw = mint_token(key=KEY, seller_id=SELLER, categories=[Category.PRICES, Category.READ_ONLY])
    token = parse_token(raw)
    eps.check_token(token, PRICES_GOODS_LIST)
    with pytest.raises(TokenError, match="read-only"):
        eps.check_token(token, PRICES_UPLOAD_TASK)


def test_base_tokens_get_small_limits_or_none() -> None:
    fin = FINANCE_DETAILED_REPORT
    assert fin.limit_for(TokenType.PERSONAL) == Limit(60.0, 1, 1)
    assert fin.limit_for(TokenType.TEST) == Limit(60.0, 1, 1)
    assert fin.limit_for(TokenType.BASE) == Limit(86400.0, 2, 1)
    stocks = ANALYTICS_STOCKS_WB_WAREHOUSES
    assert not stocks.allows(TokenType.BASE)
    with pytest.raises(ValueError):
        stocks.limit_for(TokenType.BASE)
    base = parse_token(
        mint_token(
            key=KEY, seller_id=SELLER, token_type=TokenType.BASE, categories=[Category.ANALYTICS]
        )
    )
    with pytest.raises(TokenError, match="base"):
        eps.check_token(base, stocks)


def test_prices_methods_share_one_group_others_do_not() -> None:
    groups = [e.group for e in eps.ENDPOINTS.values()]
    assert PRICES_GOODS_LIST.group == PRICES_UPLOAD_TASK.group == "prices"
    others = [g for g in groups if g != "prices"]
    assert len(others) == len(set(others)) == len(eps.ENDPOINTS) - 2
    # /ping is counted on each host: one group a section.
    pings = [eps.ping(s) for s in eps.SECTIONS.values()]
    assert {p.group for p in pings if p is not None} == {f"{s}.ping" for s in eps.SECTIONS}


def test_base_url_resolution() -> None:
    ep = FINANCE_DETAILED_REPORT
    assert ep.url() == "https://finance-api.wildberries.ru/api/finance/v1/sales-reports/detailed"
    one = Settings(wb_base_url="http://127.0.0.1:9/")
    assert ep.url(wb_hosts(one)) == "http://127.0.0.1:9/api/finance/v1/sales-reports/detailed"
    per = Settings(wb_base_url="http://a", wb_base_urls={"finance": "http://f"})
    assert ep.url(wb_hosts(per)).startswith("http://f/")
    assert STATISTICS_SALES.url(wb_hosts(per)).startswith("http://a/")


def test_expiry_checked_against_now() -> None:
    now = datetime.now(UTC)
    raw = mint_token(key=KEY, seller_id=str(uuid.uuid4()), lifetime=timedelta(hours=1), now=now)
    parse_token(raw, now=now)
    with pytest.raises(TokenError):
        parse_token(raw, now=now + timedelta(hours=2))
