"""A local emulator of the WB seller API methods wbsync uses (see docs/emulator.md)."""

from wbsync.emulator.config import EmulatorConfig, FaultRule, LimitSpec, SellerSizes
from wbsync.emulator.server import Emulator, running_emulator, serve
from wbsync.emulator.state import expected_rows

__all__ = [
    "Emulator",
    "EmulatorConfig",
    "FaultRule",
    "LimitSpec",
    "SellerSizes",
    "expected_rows",
    "running_emulator",
    "serve",
]
