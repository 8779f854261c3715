"""Refusals no retry fixes, as the emulator gives them per token and seller: a revoked token
(401 "token problem"), an empty balance (402), over real HTTP and through the Emulator."""

from __future__ import annotations

import httpx

from tests.support.wb import SELLER_A, SELLER_B
from wbsync.emulator.server import Emulator

COEFFICIENTS = "/api/tariffs/v1/acceptance/coefficients"


async def test_a_revoked_token_gets_401_token_problem_and_another_token_does_not(
    emulator: Emulator, emu_http: httpx.AsyncClient
) -> None:
    revoked, other = emulator.token(SELLER_A), emulator.token(SELLER_A)
    assert (await emu_http.get(COEFFICIENTS, headers={"Authorization": revoked})).is_success

    reply = await emu_http.post("/__emulator/tokens/revoke", json={"token": revoked})
    assert reply.status_code == 200 and revoked not in reply.text

    refused = await emu_http.get(COEFFICIENTS, headers={"Authorization": revoked})
    assert refused.status_code == 401
    assert refused.json()["detail"] == "token problem; token is revoked"
    assert (await emu_http.get(COEFFICIENTS, headers={"Authorization": other})).is_success
    bad = await emu_http.post("/__emulator/tokens/revoke", json={"token": "not-a-token"})
    assert bad.status_code == 400

    emulator.reset()
    assert (await emu_http.get(COEFFICIENTS, headers={"Authorization": revoked})).is_success


async def test_an_empty_balance_gets_402_for_its_seller_until_refilled(
    emulator: Emulator, emu_http: httpx.AsyncClient
) -> None:
    mine, theirs = emulator.token(SELLER_A), emulator.token(SELLER_B)
    reply = await emu_http.post("/__emulator/balance", json={"seller": SELLER_A, "method": "*"})
    assert reply.status_code == 200

    refused = await emu_http.get(COEFFICIENTS, headers={"Authorization": mine})
    assert refused.status_code == 402 and refused.json()["title"] == "payment required"
    assert (await emu_http.get(COEFFICIENTS, headers={"Authorization": theirs})).is_success

    emulator.set_balance(SELLER_A, empty=False)
    assert (await emu_http.get(COEFFICIENTS, headers={"Authorization": mine})).is_success
    emulator.set_balance(SELLER_A, empty=True, method="finance.detailed_report")
    assert (await emu_http.get(COEFFICIENTS, headers={"Authorization": mine})).is_success
