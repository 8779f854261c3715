"""WB's words: read from every shape WB writes errors in, cleaned (tests/ratelimit/
test_ratelimit_words.py), carried by the client's errors; the emulator answers each shape on
demand."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest

from tests.support.wb import SELLER_A
from wbsync.emulator import FaultRule
from wbsync.emulator.server import Emulator
from wbsync.errors import (
    FailureBudgetExhausted,
    WbApiError,
    WbBadResponseError,
    WbRequestError,
    WbServerError,
)
from wbsync.ratelimit.words import MASK
from wbsync.syncs.pricing import upload_prices
from wbsync.wb import endpoints as eps
from wbsync.wb.client import WbClient
from wbsync.wb.methods import PRICES_GOODS_LIST
from wbsync.wb.retry import RetryPolicy
from wbsync.wb.words import wb_words

ClientFactory = Callable[..., WbClient]
JSON = {"Content-Type": "application/json"}
FULLSTATS_400 = "there are no companies with correct intervals"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzaWQiOiIxMjMiLCJleHAiOjF9.c2lnbmF0dXJlLW9mLXRoZS10b2tlbg"


def _json(body: Any) -> bytes:
    return orjson.dumps(body)


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (
            {"title": "invalid payload", "detail": "limit must be > 0"},
            "invalid payload: limit must be > 0",
        ),
        ({"title": "path not found", "detail": "path not found"}, "path not found"),
        ({"error": FULLSTATS_400}, FULLSTATS_400),
        (
            {"errors": ["invalid start day", "dateTo before dateFrom"]},
            "invalid start day; dateTo before dateFrom",
        ),
        ({"error": True, "errorText": "Неверный запрос", "data": None}, "Неверный запрос"),
        ({"message": "internal error"}, "internal error"),
        (["a", "b"], "a; b"),
        ({"foo": 1}, '{"foo":1}'),  # an object of no known shape: as it is
    ],
)
def test_every_json_shape_gives_its_words(body: Any, words: str) -> None:
    assert wb_words(400, JSON, _json(body)) == words


def test_plain_text_and_html_give_their_text() -> None:
    assert wb_words(502, {}, b"  upstream\n\tconnect error  ") == "upstream connect error"
    page = (
        b"<html><head><title>502 Bad Gateway</title><style>h1 {color: red}</style></head>"
        b"<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<script>var x = 1;</script>"
        b"<p>try &amp; again</p><hr><center>nginx</center></body></html>"
    )
    assert wb_words(502, {"Content-Type": "text/html"}, page) == (
        "502 Bad Gateway try & again nginx"
    )
    # A page sent as text/plain is still a page.
    assert wb_words(503, {}, b"<!DOCTYPE html><html><body>down</body></html>") == "down"


def test_a_success_speaks_only_when_its_body_is_an_error_object() -> None:
    assert wb_words(200, JSON, _json({"error": True, "errorText": "bad nmID"})) == "bad nmID"
    assert wb_words(200, JSON, _json({"error": FULLSTATS_400})) == FULLSTATS_400
    # Data, WB's "no error" object, and a body that is not JSON say nothing.
    assert wb_words(200, JSON, _json([{"nmID": 1, "title": "shirt"}])) is None
    ok = {"data": {"id": 1}, "error": False, "errorText": "This task already exists"}
    assert wb_words(200, JSON, _json(ok)) is None
    assert wb_words(200, {}, b"<html>portal</html>") is None
    assert wb_words(500, {}, b"") is None and wb_words(500, {}, b"   ") is None


def test_tokens_are_masked_wherever_they_stand() -> None:
    for raw in (
        f"token problem; token {JWT} expired",
        f'{{"detail": "Authorization: Bearer {JWT}"}}',
        "bearer abc-def-secret-value rejected",
    ):
        words = wb_words(401, {}, raw.encode())
        assert words is not None
        assert JWT not in words and "secret-value" not in words
        assert "c2lnbmF0dXJl" not in words and MASK in words


def test_an_error_says_wbs_words_in_its_message_and_carries_them() -> None:
    error = WbRequestError(
        "WB refused the request", method="m", status=400, request_id="r1", words=FULLSTATS_400
    )
    assert error.words == FULLSTATS_400
    assert str(error) == (
        f'WB refused the request; WB said: "{FULLSTATS_400}" (method=m, status=400, request_id=r1)'
    )
    assert WbApiError("no answer", method="m").words is None
    ended = FailureBudgetExhausted(3, error)
    assert ended.words == FULLSTATS_400 and FULLSTATS_400 in str(ended)


SHAPES = [
    ("problem", "statistics.sales", "invalid date"),
    # fullstats' "no companies" in this shape is its no-data answer (tests/wb/test_wb_no_data.py).
    ("error", "promotion.fullstats", "invalid end date"),
    ("errors", "statistics.orders", "invalid start day"),
    ("error_text", "content.cards_list", "Invalid cursor"),
    ("message", "prices.goods_list", "bad filter"),
    ("text", "prices.goods_list", "bad request"),
    ("html", "prices.goods_list", "bad request"),
]


@pytest.mark.parametrize(("shape", "method", "words"), SHAPES)
async def test_a_4xx_in_each_shape_reaches_the_client_error(
    emulator: Emulator, client_factory: ClientFactory, shape: str, method: str, words: str
) -> None:
    emulator.set_faults([FaultRule(kind="refuse", status=400, shape=shape, words=words)])  # type: ignore[arg-type]
    ep = eps.endpoint(method)
    async with client_factory() as client:
        with pytest.raises(WbRequestError) as info:
            await client.call(ep, params={"limit": 1} if ep.method == "GET" else None, json={})
    assert info.value.status == 400
    said = info.value.words
    assert said is not None and words in said
    assert f'WB said: "{said}"' in str(info.value)
    assert emulator.counters.total() == 1  # a refusal is not retried


@pytest.mark.parametrize("shape", ["text", "html", "problem"])
async def test_a_5xx_keeps_wbs_words_when_the_retries_give_up(
    emulator: Emulator,
    client_factory: ClientFactory,
    caplog: pytest.LogCaptureFixture,
    shape: str,
) -> None:
    words = "upstream connect error or disconnect/reset before headers"
    emulator.set_faults([FaultRule(kind="error", status=503, shape=shape, words=words)])  # type: ignore[arg-type]
    async with client_factory(retry=RetryPolicy(attempts=2)) as client:
        with pytest.raises(WbServerError) as info:
            await client.call(PRICES_GOODS_LIST, params={"limit": 1})
    assert info.value.words is not None and words in info.value.words
    assert words in str(info.value)
    retried = [r.getMessage() for r in caplog.records if "try 2 of 2" in r.getMessage()]
    assert retried and words in retried[0]  # the retry's log line says them too


async def test_a_200_with_an_error_object_is_unusable_and_says_wbs_words(
    emulator: Emulator, client_factory: ClientFactory
) -> None:
    emulator.set_faults(
        [FaultRule(kind="error_body", method="prices.upload_task", words="Ошибка: неверный offset")]
    )
    async with client_factory() as client:
        with pytest.raises(WbBadResponseError) as info:
            await upload_prices(client, [{"nmID": 1, "price": 500, "discount": 5}])
    assert info.value.status == 200 and info.value.words == "Ошибка: неверный offset"
    assert "неверный offset" in str(info.value)


async def test_an_html_page_in_place_of_json_says_its_text(
    emulator: Emulator, client_factory: ClientFactory
) -> None:
    emulator.set_faults(
        [FaultRule(kind="error_body", shape="html", words="please log in", count=1)]
    )
    async with client_factory() as client:
        with pytest.raises(WbBadResponseError, match="not JSON") as info:
            await client.call(PRICES_GOODS_LIST, params={"limit": 1})
    assert info.value.words is not None and "please log in" in info.value.words


async def test_the_token_never_reaches_the_words(
    emulator: Emulator, client_factory: ClientFactory
) -> None:
    raw = emulator.token(SELLER_A)
    echoed = f"token {raw} is not valid; header was Bearer {raw}"
    emulator.set_faults([FaultRule(kind="refuse", status=400, shape="text", words=echoed)])
    async with client_factory(token=raw) as client:
        with pytest.raises(WbRequestError) as info:
            await client.call(PRICES_GOODS_LIST, params={"limit": 1})
    text = str(info.value) + repr(info.value)
    assert raw not in text and raw.split(".")[2] not in text and MASK in text
