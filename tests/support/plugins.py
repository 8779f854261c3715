"""Installing a plugin for one test without pip: a ``.dist-info`` directory with its entry points
in a folder that the test's subprocesses get on ``PYTHONPATH`` (``importlib.metadata`` finds
distributions on ``sys.path``), beside the plugin's own modules."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from wbsync.catalog.plugins import EMULATOR_GROUP, GROUP

__all__ = ["EMULATOR_GROUP", "GROUP", "install", "plugin_env"]


def install(
    site: Path,
    dist: str,
    entries: Mapping[str, Mapping[str, str]],
    modules: Mapping[str, str] = {},
) -> Path:
    """Write distribution ``dist`` (its entry points by group, and its modules' sources by file
    name) into ``site``; returns ``site``."""
    info = site / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    lines = []
    for group, named in entries.items():
        lines.append(f"[{group}]")
        lines += [f"{name} = {value}" for name, value in named.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    for name, source in modules.items():
        path = site / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return site


def plugin_env(*sites: Path, **settings: str) -> dict[str, str]:
    """This environment with ``sites`` first on ``PYTHONPATH`` and ``settings`` set."""
    path = [str(s) for s in sites] + [p for p in sys.path if p]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path), **settings}
