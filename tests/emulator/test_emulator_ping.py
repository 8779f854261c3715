"""WB's /ping on each emulated host (told apart by ``Host``) and the seller information."""

from __future__ import annotations

import httpx

from wbsync.emulator import Emulator, EmulatorConfig, running_emulator
from wbsync.emulator.wbdocs import ping_hosts

SELLER = "0000000a-0000-4000-8000-0000000000e0"


def _on(host: str, token: str) -> dict[str, str]:
    return {"Host": f"{host}.wildberries.ru", "Authorization": token}


async def test_ping_answers_on_every_emulated_host_and_judges_the_category(
    emulator: Emulator, emu_http: httpx.AsyncClient
) -> None:
    full = emulator.token(SELLER)
    hosts = ping_hosts()
    assert len(hosts) == 7 and hosts["common-api"] == "tariffs.ping"
    for host, name in hosts.items():
        reply = await emu_http.get("/ping", headers=_on(host, full))
        assert reply.status_code == 200, (host, reply.text)
        assert reply.json()["Status"] == "OK" and "TS" in reply.json()
        assert emulator.counters.snapshot()["sellers"][SELLER][name]["requests"] == 1
    content_only = emulator.token(SELLER, categories=["content"])
    refused = await emu_http.get("/ping", headers=_on("finance-api", content_only))
    assert refused.status_code == 401 and "needs finance" in refused.json()["detail"]
    # common-api takes a token of any category.
    assert (await emu_http.get("/ping", headers=_on("common-api", content_only))).is_success
    nowhere = await emu_http.get("/ping", headers=_on("marketplace-api", full))
    assert nowhere.status_code == 404 and nowhere.json()["title"] == "path not found"


async def test_ping_keeps_wbs_limit_of_three_every_30_seconds_per_host() -> None:
    # WB's own time: the fourth ping would have to wait 10 s.
    async with (
        running_emulator(EmulatorConfig(time_scale=1.0)) as emu,
        httpx.AsyncClient(base_url=emu.base_url, timeout=10.0) as http,
    ):
        token = emu.token(SELLER)
        finance = [await http.get("/ping", headers=_on("finance-api", token)) for _ in range(4)]
        assert [r.status_code for r in finance] == [200, 200, 200, 429]
        # Counted on each host: another host's ping still has its whole burst.
        assert (await http.get("/ping", headers=_on("content-api", token))).status_code == 200


async def test_seller_info_names_the_tokens_seller(
    emulator: Emulator, emu_http: httpx.AsyncClient
) -> None:
    token = emulator.token(SELLER, categories=["content"])
    reply = await emu_http.get("/api/v1/seller-info", headers={"Authorization": token})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert set(body) == {"name", "sid", "tin", "tradeMark"} and body["sid"] == SELLER
    again = await emu_http.get("/api/v1/seller-info", headers={"Authorization": token})
    assert again.json() == body
