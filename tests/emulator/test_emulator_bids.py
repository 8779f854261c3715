"""The emulator's v1 bids method over real HTTP, as WB documents it: a reply per item, the whole
call refused only for its shape or a campaign that takes no bids, Personal and Service only."""

from __future__ import annotations

from typing import Any

import httpx

from tests.support.wb import SELLER_A
from wbsync.emulator import EmulatorConfig, running_emulator
from wbsync.emulator.server import Emulator
from wbsync.wb.tokens import TokenType

V1 = "/api/advert/v1/normquery/bids"
GET_BIDS = "/adv/v0/normquery/get-bids"


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": token}


def _item(key: tuple[int, int, str], kopecks: int) -> dict[str, Any]:
    return {"advertId": key[0], "nmId": key[1], "normQuery": key[2], "bidMinorUnits": kopecks}


def _payment(emu: Emulator, advert_id: int) -> str:
    found = next(c for c in emu.expected(SELLER_A, "promotion.adverts") if c["id"] == advert_id)
    payment: str = found["settings"]["payment_type"]
    return payment


async def test_each_bid_is_set_or_failed_with_wb_reason() -> None:
    config = EmulatorConfig(min_bid_kopecks=20_000)
    async with running_emulator(config) as emu, httpx.AsyncClient(base_url=emu.base_url) as http:
        headers = _auth(emu.token(SELLER_A))
        bids = emu.state.seller(SELLER_A).bids
        key = next(k for k in bids if _payment(emu, k[0]) == "cpm")
        unknown = (key[0], key[1], "нет такого кластера")
        body = {"bids": [_item(key, 33_300), _item(unknown, 33_300), _item(key, 19_900)]}
        resp = await http.post(V1, json=body, headers=headers)
        assert resp.status_code == 200
        reply = resp.json()
        named = {"advertId": key[0], "nmId": key[1], "normQuery": key[2]}
        assert reply["success"] == [{**named, "currency": "RUB"}]
        reasons = {f["normQuery"]: f["reason"] for f in reply["failed"]}
        assert len(reply["failed"]) == 2 and set(reasons) == {unknown[2], key[2]}
        assert "not found" in reasons[unknown[2]]
        assert "below the minimum bid of 20000" in reasons[key[2]]
        got = await http.post(
            GET_BIDS, json={"items": [{"advert_id": key[0], "nm_id": key[1]}]}, headers=headers
        )
        row = next(b for b in got.json()["bids"] if b["norm_query"] == key[2])
        assert row["bid_kopecks"] == 33_300  # the bid WB set; the one below the minimum was not


async def test_a_malformed_call_or_a_campaign_without_bids_is_refused_whole(
    emulator: Emulator, emu_http: httpx.AsyncClient
) -> None:
    headers = _auth(emulator.token(SELLER_A))
    bids = emulator.state.seller(SELLER_A).bids
    cpm = next(k for k in bids if _payment(emulator, k[0]) == "cpm")
    cpc = next(k for k in bids if _payment(emulator, k[0]) == "cpc")
    before = dict(bids)
    for body in [
        {"bids": []},
        {"bids": [_item(cpm, 30_000)] * 101},
        {"bids": [{**_item(cpm, 30_000), "normQuery": 5}]},
        {"bids": [{**_item(cpm, 30_000), "bidMinorUnits": "много"}]},
        {"bids": [_item(cpm, 30_000), _item(cpc, 30_000)]},
    ]:
        resp = await emu_http.post(V1, json=body, headers=headers)
        assert resp.status_code == 400, body
    assert "payment_type" in resp.json()["detail"]
    assert dict(emulator.state.seller(SELLER_A).bids) == before  # nothing of a refused call


async def test_only_personal_and_service_tokens_may_call_it(emulator: Emulator) -> None:
    key = next(iter(emulator.state.seller(SELLER_A).bids))
    body = {"bids": [_item(key, 30_000)]}
    async with httpx.AsyncClient(base_url=emulator.base_url) as http:
        for kind, status in [
            (TokenType.PERSONAL, 200),
            (TokenType.SERVICE, 200),
            (TokenType.BASE, 403),
        ]:
            token = emulator.token(SELLER_A, token_type=kind)
            resp = await http.post(V1, json=body, headers=_auth(token))
            assert resp.status_code == status, kind
    async with httpx.AsyncClient(base_url=emulator.sandbox_url) as sandbox:
        test = emulator.token(SELLER_A, token_type=TokenType.TEST)
        resp = await sandbox.post(V1, json=body, headers=_auth(test))
        assert resp.status_code == 403 and "test token" in resp.json()["detail"]
