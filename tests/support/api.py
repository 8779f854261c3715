"""Constants and helpers shared by the HTTP API tests (kept out of the fixture plugin)."""

from __future__ import annotations

API_KEY = "test-api-key-0123456789abcdef-0123456789"
AUTH = {"Authorization": f"Bearer {API_KEY}"}
SECRET = "api-test-secret"
SCALE = 0.005  # WB's minute is 300 ms
SELLERS = [f"0000000{i}-0000-4000-8000-0000000000a0" for i in range(1, 5)]
