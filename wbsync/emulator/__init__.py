"""A local emulator of the WB seller API methods wbsync uses (see docs/emulator.md).

The names below are imported on first use, not with the package: ``wbsync emulator --help`` (and
every other command line) imports ``wbsync.emulator.cli`` and so this package, and should not pay
for the web app, pydantic and the data generator it does not run.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from wbsync.emulator.config import (
        EmulatorConfig,
        FaultRule,
        LimitSpec,
        ReplyLatency,
        ReportTaskLife,
        SellerSizes,
    )
    from wbsync.emulator.emulated import expected_rows
    from wbsync.emulator.server import Emulator, running_emulator, serve

_HOMES = {  # name: the module that defines it
    "Emulator": "server",
    "EmulatorConfig": "config",
    "FaultRule": "config",
    "LimitSpec": "config",
    "ReplyLatency": "config",
    "ReportTaskLife": "config",
    "SellerSizes": "config",
    "expected_rows": "emulated",
    "running_emulator": "server",
    "serve": "server",
}

__all__ = [
    "Emulator",
    "EmulatorConfig",
    "FaultRule",
    "LimitSpec",
    "ReplyLatency",
    "ReportTaskLife",
    "SellerSizes",
    "expected_rows",
    "running_emulator",
    "serve",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    importlib.import_module(f"{__name__}.wbdocs")  # the built-in methods, registered first
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
