"""Settings: typos are errors, and docs/settings.md is the reference generated from them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from wbsync.config import Settings, describe, unknown_variables
from wbsync.errors import ConfigError
from wbsync.syncs import SyncOptions

SETTINGS_PAGE = Path(__file__).resolve().parent.parent / "docs" / "settings.md"


def test_the_settings_page_is_generated_from_the_settings() -> None:
    """docs/settings.md is `wbsync settings --markdown`: regenerate it when a setting changes."""
    from wbsync.config.settings_doc import settings_markdown

    page = settings_markdown()
    assert all(f"| `WBSYNC_{name.upper()}` |" in page for name in Settings.model_fields)
    assert SETTINGS_PAGE.read_text(encoding="utf-8") == page, (
        "docs/settings.md is stale: run `.venv/bin/wbsync settings --markdown > docs/settings.md`"
    )


def test_a_settings_environment_gives_back_the_same_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``Settings.environment``: every setting set by its variable, secrets included; read
    back, the same settings (how a process starts children on its own settings)."""
    from datetime import UTC, datetime

    from wbsync.config import QUEUE_OPTIONS, get_settings

    settings = Settings.model_validate(
        {
            **{o.field: {"rnp-finance-sync": o.minimum + 2} for o in QUEUE_OPTIONS.values()},
            "secret_key": "a-secret",
            "api_keys": ["k" * 40],
            "calendar_origin": datetime(2026, 1, 1, 3, tzinfo=UTC),
            "limit_overrides": {"prices": {"base": {"period_s": 6, "burst": 1}}},
            "plugins": [],
            "time_scale": 0.0123456789,
            "wb_base_urls": {"finance": "http://127.0.0.1:9"},
        }
    )
    env = settings.environment()
    unset = {f"WBSYNC_{n.upper()}" for n in Settings.model_fields if getattr(settings, n) is None}
    assert set(env) == {f"WBSYNC_{n.upper()}" for n in Settings.model_fields} - unset
    for var in [v for v in os.environ if v.startswith("WBSYNC_")]:
        monkeypatch.delenv(var)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    get_settings.cache_clear()
    try:
        assert get_settings() == settings
    finally:
        get_settings.cache_clear()


def test_a_misspelt_variable_is_an_error_with_a_hint() -> None:
    problems = unknown_variables({"WBSYNC_REDIS_ULR": "redis://x", "WBSYNC_TIME_SCALE": "1"})
    assert problems == ["WBSYNC_REDIS_ULR is not a setting (did you mean WBSYNC_REDIS_URL?)"]


def test_the_test_suites_own_variable_is_not_a_setting_error() -> None:
    assert unknown_variables({"WBSYNC_TEST_POSTGRES_URL": "postgresql+asyncpg://x"}) == []


def test_invalid_values_name_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from wbsync.config import get_settings

    monkeypatch.setenv("WBSYNC_TIME_SCALE", "-1")
    get_settings.cache_clear()
    try:
        with pytest.raises(ConfigError, match="WBSYNC_TIME_SCALE"):
            get_settings()
    finally:
        get_settings.cache_clear()


SECRET = "s3cret-value-that-must-not-show"
KEY = "k" * 31 + "-api-key-that-must-not-show"
DB_PASSWORD = "pg-password-that-must-not-show"


def test_secrets_never_appear_in_a_repr() -> None:
    settings = Settings(
        secret_key=SecretStr(SECRET),
        api_keys=[SecretStr(KEY)],
        database_url=f"postgresql+asyncpg://wbsync:{DB_PASSWORD}@db:5432/wbsync",
        redis_url=f"redis://:{DB_PASSWORD}@redis:6379/0",
    )
    for shown in (repr(settings), str(settings)):
        assert SECRET not in shown and KEY not in shown and DB_PASSWORD not in shown
    assert "postgresql+asyncpg://wbsync:**********@db:5432/wbsync" in repr(settings)
    assert settings.secret_key_value() == SECRET and settings.api_key_values() == (KEY,)


def test_a_short_api_key_is_refused_with_how_to_make_one() -> None:
    with pytest.raises(ValidationError) as caught:
        Settings(api_keys=[SecretStr("x" * 32), SecretStr("x" * 31)])
    message = describe(caught.value)
    assert message.startswith("WBSYNC_API_KEYS: key #2 has 31 characters, at least 32")
    assert "openssl rand -hex 32" in message and "x" * 31 not in message


@pytest.mark.parametrize(
    ("var", "value", "said"),
    [
        ("WBSYNC_API_KEYS", '["unterminated', "WBSYNC_API_KEYS: not valid JSON"),
        ("WBSYNC_FANOUT_INTERVALS_S", "{queue: 1}", "WBSYNC_FANOUT_INTERVALS_S: not valid JSON"),
        ("WBSYNC_TIME_SCALE", "fast", "WBSYNC_TIME_SCALE: Input should be a valid number"),
        ("WBSYNC_API_KEYS", '["short"]', "WBSYNC_API_KEYS: key #1 has 5 characters"),
    ],
)
def test_every_command_reports_a_bad_setting_in_one_line_with_status_2(
    monkeypatch: pytest.MonkeyPatch, var: str, value: str, said: str
) -> None:
    from typer.testing import CliRunner

    from wbsync.cli import app
    from wbsync.config import get_settings

    monkeypatch.setenv(var, value)
    get_settings.cache_clear()
    try:
        for command in (["run"], ["api"], ["migrate"], ["cabinets", "list"], ["demo"]):
            result = CliRunner().invoke(app, command)
            assert result.exit_code == 2, (command, result.output)
            assert result.output.startswith(f"error: {said}"), (command, result.output)
            assert result.output.count("\n") == 1 and "Traceback" not in result.output
            assert value not in result.output or "short" not in value
    finally:
        get_settings.cache_clear()


@pytest.mark.long
def test_the_installed_command_prints_one_line_and_no_traceback(tmp_path: Path) -> None:
    env = {**os.environ, "WBSYNC_API_KEYS": "not json"}
    done = subprocess.run(
        [sys.executable, "-m", "wbsync", "cabinets", "list"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("error: WBSYNC_API_KEYS: not valid JSON")
    assert done.stderr.count("\n") == 1 and not (tmp_path / "wbsync.db").exists()


def test_limit_overrides_replace_a_groups_limit_per_token_type() -> None:
    from wbsync.ratelimit import Limit
    from wbsync.syncs.finance import FINANCE_DETAILED_REPORT
    from wbsync.syncs.pricing import PRICES_UPLOAD_TASK
    from wbsync.wb.tokens import TokenType

    settings = Settings.model_validate(
        {
            "limit_overrides": {
                "finance.detailed_report": {"period_s": 90, "burst": 1},
                "prices": {"base": {"period_s": 7200, "limit": 4, "burst": 1}},
            }
        }
    )
    finance = FINANCE_DETAILED_REPORT.limit_for(TokenType.SERVICE, settings.limit_overrides)
    assert finance == Limit(period_s=90, limit=1, burst=1)
    assert PRICES_UPLOAD_TASK.limit_for(TokenType.BASE, settings.limit_overrides) == Limit(
        7200, 4, 1
    )
    # Token types without an override keep the table's limit.
    assert PRICES_UPLOAD_TASK.limit_for(TokenType.PERSONAL, settings.limit_overrides) == Limit(
        6, 10, 5
    )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ('{"prices": {"period_s": 0, "burst": 1}}', "prices.period_s: Input should be greater"),
        ('{"prices": {"period_s": 6}}', "prices.burst: Field required"),
        ('{"prices": {"personal": {"period_s": 6, "burst": 1, "rate": 2}}}', "prices.personal"),
        (
            '{"analytics.stocks_wb_warehouses": {"base": {"period_s": 60, "burst": 1}}}',
            "base tokens may not call analytics.stocks_wb_warehouses",
        ),
        ('{"prices": {"base": {"period_s": 6, "burst": 1}, "burst": 1}}', "not both"),
        ("[]", "expected a JSON object"),
    ],
)
def test_a_bad_limit_override_is_refused_at_start_in_one_line(
    monkeypatch: pytest.MonkeyPatch, overrides: str, message: str
) -> None:
    from wbsync.composition.startup import load_settings
    from wbsync.config import get_settings

    monkeypatch.setenv("WBSYNC_LIMIT_OVERRIDES", overrides)
    get_settings.cache_clear()
    try:
        with pytest.raises(ConfigError, match="WBSYNC_LIMIT_OVERRIDES") as caught:
            load_settings()
    finally:
        get_settings.cache_clear()
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_limit_group_not_loaded_here_is_named_not_refused() -> None:
    from wbsync.composition.startup import check, not_loaded_here

    settings = Settings.model_validate(
        {"limit_overrides": {"finance": {"period_s": 90, "burst": 1}}}
    )
    assert check(settings) == []
    notice = not_loaded_here(settings)
    assert notice is not None and "\n" not in notice
    assert notice.startswith(
        "WBSYNC_LIMIT_OVERRIDES: limit group(s) ['finance'] not loaded here (did you mean"
    )
    assert "not loaded here" in notice


def test_a_funnel_window_past_wbs_last_week_is_refused_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """WB serves the sales-funnel history of the last week only: 31 days used to be accepted
    (and asked of WB); now it is refused at start, naming the variable and WB's bound."""
    from wbsync.config import FUNNEL_DAYS_MAX, get_settings

    assert FUNNEL_DAYS_MAX == 7
    assert Settings(sync_funnel_days=7).sync_funnel_days == 7
    assert Settings(sync_stats_days=31).sync_stats_days == 31  # advert stats: WB allows 31
    monkeypatch.setenv("WBSYNC_SYNC_FUNNEL_DAYS", "31")
    get_settings.cache_clear()
    try:
        with pytest.raises(ConfigError) as refused:
            get_settings()
    finally:
        get_settings.cache_clear()
    message = str(refused.value)
    assert "WBSYNC_SYNC_FUNNEL_DAYS" in message and "last week" in message
    assert "at most 7 days" in message
    with pytest.raises(ValueError, match="funnel_days must be 1 to 7"):
        SyncOptions(funnel_days=8)
