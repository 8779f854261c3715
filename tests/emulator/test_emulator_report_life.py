"""A report task's life is the emulator config's (``report_tasks``, WB's by default), at the
time scale: over real HTTP, a report WB's 2 hours keep is purged before a download at a tiny
scale, one kept longer is served, and one not yet built is processing."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

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
