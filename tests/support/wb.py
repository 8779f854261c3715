"""Constants shared by the WB client and emulator tests (kept out of the fixture plugin)."""

from __future__ import annotations

from datetime import date

from wbsync.emulator import EmulatorConfig

SELLER_A = "3f2c1a7e-8b9d-4c6e-a1f0-123456789abc"
SELLER_B = "9b1e6d2c-4a7f-4e3b-b5c8-fedcba987654"

#: The generated data's "today", fixed so the tests' dates never move with the wall clock.
ANCHOR = date(2026, 8, 17)

#: WB's minutes become tens of milliseconds; small pages so every pull takes several requests.
FAST = EmulatorConfig(
    serve_disabled_in_docs=True,  # the booking monitor polls acceptance coefficients
    time_scale=0.001,
    anchor_date=ANCHOR,
    page_size={"statistics.orders": 7, "statistics.sales": 6},
)
