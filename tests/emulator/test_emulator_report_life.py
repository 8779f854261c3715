"""A report task's life is the emulator config's (``report_tasks``, WB's by default), at the
time scale: over real HTTP, a report WB's 2 hours keep is purged before a download at a tiny
scale, one kept longer is served, and one not yet built is processing."""

from __future__ import annotations

import time
from collections.abc import Awaitable
from pathlib import Path

import httpx
import pytest

from tests.support.waiting import wait_for
from tests.support.wb import ANCHOR, SELLER_A
from wbsync.emulator import EmulatorConfig, ReportTaskLife, running_emulator
from wbsync.errors import ConfigError

REMAINS = "/api/v1/warehouse_remains"
TINY = 1e-9  # WB's 2 hours are 7.2 us: shorter than any round trip


async def _download(config: EmulatorConfig) -> tuple[str, int]:
    """Create a warehouse remains task; its status, then its download's HTTP status."""
    async with running_emulator(config) as emu, httpx.AsyncClient(base_url=emu.base_url) as http:
        headers = {"Authorization": emu.token(SELLER_A)}
        created = await http.get(REMAINS, headers=headers)
        assert created.status_code == 200, created.text
        task = f"{REMAINS}/tasks/{created.json()['data']['taskId']}"
        status = (await http.get(f"{task}/status", headers=headers)).json()["data"]["status"]
        return status, (await http.get(f"{task}/download", headers=headers)).status_code


async def test_wbs_two_hours_at_a_tiny_scale_purge_the_report_before_its_download() -> None:
    config = EmulatorConfig(time_scale=TINY, anchor_date=ANCHOR)
    assert config.report_tasks == ReportTaskLife(new_s=2.0, build_s=20.0, kept_s=7200.0)
    assert await _download(config) == ("purged", 404)


async def test_a_report_kept_longer_is_downloaded_at_the_same_scale() -> None:
    life = ReportTaskLife(kept_s=3600 / TINY)  # an hour of real time
    config = EmulatorConfig(time_scale=TINY, anchor_date=ANCHOR, report_tasks=life)
    assert await _download(config) == ("done", 200)


async def test_a_report_not_yet_built_is_processing_and_not_downloadable() -> None:
    life = ReportTaskLife(new_s=0.0, build_s=3600.0)  # built an hour after its creation
    config = EmulatorConfig(time_scale=1.0, anchor_date=ANCHOR, report_tasks=life)
    assert await _download(config) == ("processing", 400)


def test_a_life_built_before_it_stops_being_new_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "emulator.json"
    path.write_text('{"report_tasks": {"new_s": 30, "build_s": 20}}', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"report_tasks: .*build_s"):
        EmulatorConfig.from_file(path)


async def test_a_purged_report_is_let_go_then_forgotten() -> None:
    # Kept 0.3 s of real time: purged after it (its rows let go), forgotten (404) once purged
    # as long again, when the seller's next task is created.
    scale = 0.001  # WB's status limit (1 a 5 s) lets the polls through every 5 ms
    life = ReportTaskLife(new_s=0.0, build_s=0.0, kept_s=300.0)
    config = EmulatorConfig(time_scale=scale, anchor_date=ANCHOR, report_tasks=life)
    async with running_emulator(config) as emu, httpx.AsyncClient(base_url=emu.base_url) as http:
        headers = {"Authorization": emu.token(SELLER_A)}

        async def status(task: str) -> int | str:
            reply = await http.get(f"{REMAINS}/tasks/{task}/status", headers=headers)
            return reply.json()["data"]["status"] if reply.status_code == 200 else reply.status_code

        async def created() -> str:
            reply = await http.get(REMAINS, headers=headers)
            assert reply.status_code == 200, reply.text
            return str(reply.json()["data"]["taskId"])

        first = await created()
        made = time.monotonic()
        await wait_for(lambda: _is(status(first), "purged"))
        download = await http.get(f"{REMAINS}/tasks/{first}/download", headers=headers)
        assert download.status_code == 404
        # Purged as long as it was kept (WB's time passing is the condition): the seller's
        # next create forgets it.
        await wait_for(lambda: time.monotonic() > made + 2 * life.kept_s * scale)
        await created()
        assert await status(first) == 404


async def _is(value: Awaitable[object], expected: object) -> bool:
    return await value == expected
