"""Per-queue settings are one table (``wbsync.config.QUEUE_OPTIONS``): each row is a setting
with its bound checked in one line, a lookup through ``queue_option`` (the queue's entry, else
its sync's own figure, else the fallback setting), a name checked against the registry (not
loaded here: a warning) and a line of docs/settings.md."""

from __future__ import annotations

import typing
from typing import Any

import pytest

from wbsync.composition.startup import check, not_loaded_here
from wbsync.composition.workers import queue_option
from wbsync.config import QUEUE_OPTIONS, Settings, get_settings
from wbsync.config.settings_doc import settings_markdown
from wbsync.errors import ConfigError
from wbsync.syncs import SYNCS
from wbsync.values.queue_options import QueueOption

OPTIONS = list(QUEUE_OPTIONS.values())
IDS = [o.key for o in OPTIONS]
FINANCE = "rnp-finance-sync"


def _settings(**fields: Any) -> Settings:
    return Settings(**fields)


def _past_bound(option: QueueOption) -> float:
    return option.minimum if option.above else option.minimum - 1


@pytest.mark.parametrize("option", OPTIONS, ids=IDS)
def test_each_option_is_a_described_per_queue_setting_on_the_settings_page(
    option: QueueOption,
) -> None:
    info = Settings.model_fields[option.field]
    assert typing.get_origin(info.annotation) is dict
    assert info.description == option.describe()
    assert option.bound in info.description
    page = settings_markdown()
    assert f"| `{option.variable}` | {option.bound} |" in page
    assert option.fallback is None or option.fallback in Settings.model_fields
    assert option.own is not None or option.fallback is not None  # every queue has a value


@pytest.mark.parametrize("option", OPTIONS, ids=IDS)
def test_a_value_past_an_options_bound_is_refused_in_one_line_naming_it(
    option: QueueOption, monkeypatch: pytest.MonkeyPatch
) -> None:
    at_bound = option.minimum + (1 if option.above else 0)
    assert getattr(_settings(**{option.field: {FINANCE: at_bound}}), option.field) == {
        FINANCE: at_bound
    }
    monkeypatch.setenv(option.variable, f'{{"{FINANCE}": {_past_bound(option):g}}}')
    get_settings.cache_clear()
    try:
        with pytest.raises(ConfigError) as refused:
            get_settings()
    finally:
        get_settings.cache_clear()
    message = str(refused.value)
    assert message.startswith(f"{option.variable}: {FINANCE}: give each queue {option.bound}")
    assert "\n" not in message


@pytest.mark.parametrize("option", OPTIONS, ids=IDS)
def test_queue_option_reads_the_queues_entry_else_its_syncs_figure_else_the_fallback(
    option: QueueOption,
) -> None:
    named = option.minimum + 7
    settings = _settings(**{option.field: {FINANCE: named}})
    assert queue_option(settings, FINANCE, option.key) == named
    for queue, sync in SYNCS.items():
        if queue == FINANCE:
            continue
        own = getattr(sync, option.own) if option.own else None
        expected = own if own is not None else getattr(settings, str(option.fallback))
        assert queue_option(settings, queue, option.key) == expected


def test_a_sync_without_a_figure_of_its_own_takes_the_fallback_setting() -> None:
    assert SYNCS["booking-slot-monitor"].concurrency == 10
    assert SYNCS[FINANCE].concurrency is None
    settings = Settings(sync_queue_concurrency=3, job_failure_budget=4, defer_threshold_ms=9)
    assert queue_option(settings, "booking-slot-monitor", "concurrency") == 10
    assert queue_option(settings, FINANCE, "concurrency") == 3
    assert queue_option(settings, FINANCE, "failure_budget") == 4
    assert queue_option(settings, FINANCE, "defer_threshold_ms") == 9
    with pytest.raises(KeyError):
        queue_option(settings, FINANCE, "no-such-option")


def test_every_option_naming_a_queue_not_loaded_here_warns_and_never_refuses() -> None:
    ghost = "a-plugins-queue"
    settings = _settings(
        **{o.field: {ghost: o.minimum + 1, FINANCE: o.minimum + 1} for o in OPTIONS}
    )
    assert check(settings) == []
    notice = not_loaded_here(settings)
    assert notice is not None and "\n" not in notice
    for option in OPTIONS:
        assert f"{option.variable}: queue(s) ['{ghost}'] not loaded here" in notice
    assert f"'{FINANCE}'" not in notice
    assert (
        not_loaded_here(_settings(**{o.field: {FINANCE: o.minimum + 1} for o in OPTIONS})) is None
    )
