"""Constants shared by the WB client and emulator tests (kept out of the fixture plugin)."""

from __future__ import annotations

from wbsync.emulator import EmulatorConfig

SELLER_A = "3f2c1a7e-8b9d-4c6e-a1f0-123456789abc"
SELLER_B = "9b1e6d2c-4a7f-4e3b-b5c8-fedcba987654"

#: WB's minutes become tens of milliseconds; small pages so every pull takes several requests.
FAST = EmulatorConfig(
    time_scale=0.001,
    page_size={"statistics.orders": 7, "statistics.sales": 6},
)
