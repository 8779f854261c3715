"""Where the application is composed: settings read, plugins loaded, then the settings' names
checked against the registry the plugins completed. Every command starts here (``wbsync.cli``).

``Settings`` checks each value on its own; what depends on other layers (a queue, a WB method, a
limit group or token type named in a setting, a Redis URL's form) is checked here, with the same
one-line ``ConfigError`` (the variable, what is wrong, what exists).
"""

from __future__ import annotations

import difflib
from collections.abc import Collection
from typing import Any

from wbsync.catalog import plugins
from wbsync.config import QUEUE_OPTIONS, SETTINGS_TABLE, Settings, get_settings
from wbsync.emulator.wbdocs import METHODS
from wbsync.errors import ConfigError
from wbsync.redis.redis_client import url_problem
from wbsync.store.datasets import DATASETS
from wbsync.syncs import SYNCS
from wbsync.values.limit_overrides import ALL_TOKEN_TYPES
from wbsync.wb.endpoints import ENDPOINTS, GROUPS, SECTIONS, group_token_types
from wbsync.wb.hosts import base_url_problems
from wbsync.wb.options import Hosts
from wbsync.wb.tokens import TokenType

__all__ = ["check", "load_settings", "not_loaded_here", "start"]

# What `wbsync plugins` reports per plugin.
_REPORTED: tuple[Any, ...] = (SYNCS, DATASETS, ENDPOINTS, SECTIONS, GROUPS, METHODS)


def load_settings() -> Settings:
    """The process's settings, with the plugins loaded and every name checked (once)."""
    settings = get_settings()
    start(settings)
    return settings


def start(settings: Settings) -> list[plugins.Loaded]:
    """Load the allowed plugins, then check ``settings`` against the registry;
    ``ConfigError`` in one line on a refused plugin or a wrong name."""
    loaded = plugins.load(allow=settings.plugins, tables=_REPORTED)
    problems = check(settings)
    if problems:
        raise ConfigError("; ".join(problems) + f" ({SETTINGS_TABLE})")
    return loaded


def check(settings: Settings) -> list[str]:
    """What in ``settings`` is wrong for this process, one line per variable.

    A queue or limit group this process does not know is not wrong: another process of the fleet
    may load the plugin that declares it (``not_loaded_here``)."""
    problems = []
    if settings.redis_url and (problem := url_problem(settings.redis_url)):
        problems.append(f"WBSYNC_REDIS_URL: {problem}")
    unknown = [n for n in settings.wb_disabled_methods if n not in ENDPOINTS]
    if unknown:
        problems.append(
            f"WBSYNC_WB_DISABLED_METHODS: unknown WB method(s) {unknown}; "
            f"known: {', '.join(ENDPOINTS)}"
        )
    problem = _override_problem(settings)
    if problem:
        problems.append(f"WBSYNC_LIMIT_OVERRIDES: {problem}")
    # A WB host given for a section it does not serve: every request would be "path not found".
    # (Hosts built here, not by wbsync.shared.runtime.wb_hosts: every command starts here, and the
    # runtime's imports, the job queue's among them, are not every command's.)
    hosts = Hosts(
        base_url=settings.wb_base_url,
        base_urls=settings.wb_base_urls,
        sandbox_base_url=settings.wb_sandbox_base_url,
    )
    problems += base_url_problems(hosts)
    return problems


def not_loaded_here(settings: Settings) -> str | None:
    """One line naming the queues and limit groups ``settings`` give values for that no loaded
    plugin declares, or None: a process of a mixed fleet ignores them (another process may load
    their plugin), and says so, since a misspelt name looks the same."""
    unknown = []
    for option in QUEUE_OPTIONS.values():
        queues = sorted(set(getattr(settings, option.field)) - set(SYNCS))
        if queues:
            unknown.append(f"{option.variable}: queue(s) {queues} not loaded here")
    allowed = group_token_types()
    groups = sorted(set(settings.limit_overrides) - set(allowed))
    if groups:
        hints = [f"{c!r} for {g!r}" for g in groups if (c := _close_group(g, allowed))]
        hint = f" (did you mean {', '.join(hints)}?)" if hints else ""
        unknown.append(f"WBSYNC_LIMIT_OVERRIDES: limit group(s) {groups} not loaded here{hint}")
    if not unknown:
        return None
    return (
        f"{'; '.join(unknown)}; this process ignores them: a process that loads their plugin "
        f"uses them, else fix the name (queues loaded here: {', '.join(SYNCS)})"
    )


def _close_group(group: str, allowed: Collection[str]) -> str | None:
    close = [g for g in allowed if g.startswith(f"{group}.")] or (
        difflib.get_close_matches(group, allowed, n=1, cutoff=0.8)
    )
    return close[0] if close else None


def _override_problem(settings: Settings) -> str | None:
    allowed = group_token_types()
    for group, per_type in settings.limit_overrides.items():
        if group not in allowed:
            continue  # not loaded here: not_loaded_here names it
        for name in per_type:
            if name == ALL_TOKEN_TYPES:
                continue
            if name not in {t.value for t in TokenType}:
                kinds = ", ".join(t.value for t in TokenType)
                return f"{group}: no token type {name!r}; types: {kinds}"
            if TokenType(name) not in allowed[group]:
                return f"{name} tokens may not call {group}: drop that override"
    return None
