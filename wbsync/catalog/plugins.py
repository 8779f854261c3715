"""Plugins: installed packages that declare syncs (and emulated WB methods) through entry points.

Two entry-point groups, each entry a callable that takes a
:class:`~wbsync.catalog.registry.Registrar` and declares on it (``registrar.declare(...)``),
importing nothing of wbsync's private modules:

* ``wbsync.plugins``: syncs, with their WB methods, sections, limit groups and datasets
  (the types in ``wbsync.extend``);
* ``wbsync.emulator``: emulated WB methods for the local emulator (``wbsync.emulator.extend``),
  so a plugin's sync is testable offline. One package usually has an entry in both, under the
  same name.

Every command loads them once at start (``load``), before anything reads the registry, from
the installed distributions, all of them unless ``WBSYNC_PLUGINS`` names the allowed ones (an
entry's name). A plugin that cannot be imported, fails while declaring, or declares a queue,
dataset, method, section or limit group that clashes with another is refused with one line
naming it and why (``ConfigError``); then nothing of any plugin is registered.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from wbsync.catalog.registry import Registrar, Table, commit_all
from wbsync.errors import ConfigError

__all__ = [
    "EMULATOR_GROUP",
    "GROUP",
    "GROUPS",
    "Loaded",
    "diagnose",
    "installed",
    "load",
    "loaded",
]

GROUP = "wbsync.plugins"
"""The entry-point group of plugins that declare syncs."""

EMULATOR_GROUP = "wbsync.emulator"
"""The entry-point group of plugins that declare emulated WB methods."""

GROUPS = (GROUP, EMULATOR_GROUP)


@dataclass(frozen=True, slots=True)
class Loaded:
    """One loaded entry point: its group and name, what it points to, its distribution, and
    the keys it declared per table kind."""

    group: str
    name: str
    value: str
    dist: str
    declared: dict[str, list[str]]


_loaded: dict[str, list[Loaded]] = {}


def installed(group: str = GROUP) -> list[EntryPoint]:
    """The installed entry points of ``group``, by name."""
    return sorted(entry_points(group=group), key=lambda ep: ep.name)


def loaded() -> list[Loaded]:
    """What this process has loaded, in load order."""
    return [one for group in GROUPS for one in _loaded.get(group, [])]


def load(
    *,
    allow: Collection[str] | None,
    groups: Collection[str] = GROUPS,
    tables: Collection[Table[Any]] = (),
) -> list[Loaded]:
    """Load and register the allowed plugins of ``groups`` (every installed one when ``allow``
    is None), once per process and group; ``ConfigError`` (nothing registered) on a refusal.

    ``tables`` are the tables whose keys :func:`loaded` reports per plugin (for
    ``wbsync plugins``)."""
    wanted = [group for group in groups if group not in _loaded]
    if not wanted:
        return loaded()
    everything = {ep.name for group in GROUPS for ep in installed(group)}
    if allow is not None:
        missing = sorted(set(allow) - everything)
        if missing:
            known = ", ".join(sorted(everything)) or "none"
            raise ConfigError(
                f"WBSYNC_PLUGINS names {missing}, not installed; installed plugins: {known}"
            )
    pending: list[tuple[str, EntryPoint, Registrar]] = []
    for group in wanted:
        for ep in installed(group):
            if allow is None or ep.name in allow:
                registrar = Registrar(ep.name)
                _declare(ep, registrar)
                pending.append((group, ep, registrar))
    commit_all(registrar for _, _, registrar in pending)
    for group in wanted:
        _loaded[group] = [
            Loaded(
                group=group,
                name=ep.name,
                value=ep.value,
                dist=_dist(ep),
                declared={t.kind: keys for t in tables if (keys := registrar.declared(t))},
            )
            for g, ep, registrar in pending
            if g == group
        ]
    return loaded()


def diagnose(*, allow: Collection[str] | None) -> dict[tuple[str, str], str]:
    """Each allowed installed plugin's own refusal, by (group, name), each tried alone against
    what is registered now; nothing is registered. For ``wbsync plugins`` after a refused
    start, so it can show which plugin is broken beside the others."""
    refused = {}
    for group in GROUPS:
        for ep in installed(group):
            if allow is not None and ep.name not in allow:
                continue
            registrar = Registrar(ep.name)
            try:
                _declare(ep, registrar)
                registrar.check()
            except ConfigError as exc:
                refused[(group, ep.name)] = str(exc)
    return refused


def _declare(ep: EntryPoint, registrar: Registrar) -> None:
    try:
        target = ep.load()
    except Exception as exc:  # anything a broken package raises on import
        raise ConfigError(
            f"plugin {ep.name!r} ({ep.value}) cannot be imported: {type(exc).__name__}: {exc}"
        ) from None
    if not callable(target):
        raise ConfigError(f"plugin {ep.name!r}: {ep.value} is not a callable taking a registrar")
    register: Callable[[Registrar], object] = target
    try:
        register(registrar)
    except ConfigError:
        raise
    except Exception as exc:  # a plugin's own bug while declaring
        raise ConfigError(
            f"plugin {ep.name!r} failed while declaring: {type(exc).__name__}: {exc}"
        ) from None


def _dist(ep: EntryPoint) -> str:
    dist = ep.dist
    return f"{dist.name} {dist.version}" if dist is not None else "?"
