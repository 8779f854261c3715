"""The emulator's configuration file and the functions behind ``wbsync emulator``."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from tests.support.calendar import reading
from tests.support.wb import SELLER_A, SELLER_B
from wbsync.emulator import EmulatorConfig, expected_rows
from wbsync.emulator.cli_support import issue_token, load_config
from wbsync.emulator.tokens import Kind
from wbsync.emulator.wbdocs import Rate
from wbsync.errors import ConfigError
from wbsync.system import clock
from wbsync.wb.tokens import Category, TokenType, verify_token


def test_file_sets_limits_sizes_faults_and_options_win(tmp_path: Path) -> None:
    path = tmp_path / "emu.json"
    path.write_text(
        json.dumps(
            {
                "seed": 3,
                "time_scale": 0.5,
                "limits": {
                    "prices": {"period_s": 1, "limit": 2, "burst": 3},
                    "finance.detailed_report": {"base": {"period_s": 10, "limit": 1, "burst": 1}},
                },
                "seller_sizes": {SELLER_B: {"products": 2, "orders": 4}},
                "faults": [{"kind": "error", "share": 0.25}],
            }
        )
    )
    cfg = load_config(path, time_scale=0.01)
    assert cfg.seed == 3 and cfg.time_scale == 0.01
    assert cfg.limit_for("prices.upload_task", Kind.PERSONAL) == Rate(1, 2, 3)
    assert cfg.limit_for("finance.detailed_report", Kind.BASE) == Rate(10, 1, 1)
    assert cfg.limit_for("finance.detailed_report", Kind.PERSONAL) == Rate(60, 1, 1)
    assert cfg.limit_for("analytics.stocks_wb_warehouses", Kind.BASE) is None
    assert len(expected_rows(cfg, SELLER_B, "content.cards_list")) == 2
    assert len(expected_rows(cfg, SELLER_B, "statistics.orders")) == 4
    assert len(expected_rows(cfg, SELLER_A, "content.cards_list")) == cfg.sizes.products
    assert cfg.faults[0].share == 0.25


def test_unknown_keys_are_errors(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"seed": 1, "tim_scale": 0.1}))
    with pytest.raises(ConfigError, match="tim_scale"):
        EmulatorConfig.from_file(path)
    with pytest.raises(ConfigError, match="cannot read"):
        EmulatorConfig.from_file(tmp_path / "missing.json")


def test_issued_tokens_verify_with_the_emulators_key() -> None:
    cfg = EmulatorConfig(signing_key="a-private-key-for-this-test-only-123")
    raw = issue_token(seller=SELLER_A, token_type="test", categories="content, prices", config=cfg)
    token = verify_token(raw, cfg.signing_key)
    assert token.type is TokenType.TEST
    assert token.categories == {Category.CONTENT, Category.PRICES}
    with pytest.raises(ValueError, match="unknown token category"):
        issue_token(seller=SELLER_A, categories="contnet")


def test_the_emulators_today_is_moscows_date() -> None:
    evening = datetime(2026, 12, 5, 21, 30, tzinfo=UTC)  # 00:30 on the 6th in Moscow
    still = reading(evening)
    on_calendar = EmulatorConfig(calendar_origin=still.origin, time_scale=still.time_scale)
    assert on_calendar.today() == date(2026, 12, 6)
    clock.set_calendar(still.origin, still.time_scale)
    try:
        assert EmulatorConfig().anchor_date == date(2026, 12, 6)  # the default: WB's today
    finally:
        clock.set_calendar(None)
