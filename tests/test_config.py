"""Settings: typos are errors, and the README documents every setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from wbsync.config import Settings, unknown_variables
from wbsync.errors import ConfigError

README = Path(__file__).resolve().parent.parent / "README.md"


def test_every_setting_is_in_the_readme_table() -> None:
    text = README.read_text(encoding="utf-8")
    missing = [name for name in Settings.model_fields if f"| `WBSYNC_{name.upper()}` |" not in text]
    assert missing == []


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
