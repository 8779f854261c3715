"""WB's Content section (content-api): the cards list."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from starlette.responses import Response

from wbsync.emulator.dataset import Row, SellerData
from wbsync.emulator.emulated import Call, EmulatedMethod, ping
from wbsync.emulator.method import MINUTE, Method, Rate, rates
from wbsync.emulator.params import integer
from wbsync.emulator.replies import BadRequest, json_reply
from wbsync.emulator.state import SellerState, cached

#: The most cards one page holds.
PAGE_MAX = 100

# One table without token types: every type.
CARDS_LIST = Method(
    "content.cards_list",
    "POST",
    "/content/v2/get/cards/list",
    "content-api",
    "content",
    rates(Rate(MINUTE, 100, 5), Rate(MINUTE, 100, 5)),
    x_category="content",
)


def _card_key(card: Row) -> tuple[datetime, int]:
    return (datetime.fromisoformat(card["updatedAt"]), card["nmID"])


async def cards_list(call: Call) -> Response:
    """Cards list with the (updatedAt, nmID) cursor; ``total`` is the count in this reply."""
    settings = (await call.body()).get("settings") or {}
    cursor = settings.get("cursor") or {}
    limit = min(
        integer(cursor.get("limit", PAGE_MAX), "limit", lo=1, hi=PAGE_MAX),
        call.config.page_for(call.method, PAGE_MAX),
    )
    ascending = bool((settings.get("sort") or {}).get("ascending", False))
    cards = cached(call.data, "cards", SellerData.cards)
    ordered = cards if ascending else list(reversed(cards))
    if cursor.get("updatedAt") and cursor.get("nmID") is not None:
        try:
            mark = (datetime.fromisoformat(str(cursor["updatedAt"])), int(cursor["nmID"]))
        except ValueError:
            raise BadRequest("cursor: invalid updatedAt or nmID") from None
        ordered = [
            c for c in ordered if (_card_key(c) > mark if ascending else _card_key(c) < mark)
        ]
    page = ordered[:limit]
    last = page[-1] if page else {"updatedAt": cursor.get("updatedAt"), "nmID": cursor.get("nmID")}
    return json_reply(
        {
            "cards": page,
            "cursor": {"updatedAt": last["updatedAt"], "nmID": last["nmID"], "total": len(page)},
        }
    )


def cards_rows(data: SellerData, seller: SellerState, params: dict[str, Any]) -> list[Row]:
    """Every card."""
    return cached(data, "cards", SellerData.cards)


EMULATED = (
    EmulatedMethod(CARDS_LIST, cards_list, expected=cards_rows),
    ping("content-api", "content", "content"),
)
