"""WB's parameter checks the emulated methods share (each refuses a bad value with WB's 400),
and the window an expectation's parameters name."""

from __future__ import annotations

from datetime import date
from typing import Any

from wbsync.emulator.dataset import SellerData
from wbsync.emulator.replies import BadRequest

__all__ = ["day", "history_window", "ids", "integer", "items"]


def integer(value: Any, name: str, *, lo: int = 0, hi: int | None = None) -> int:
    """``value`` as an integer in [lo, hi]."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise BadRequest(f"{name} must be an integer") from None
    if number < lo or (hi is not None and number > hi):
        raise BadRequest(f"{name} must be between {lo} and {hi}")
    return number


def day(value: Any, name: str) -> date:
    """The date a date or date-time parameter starts with."""
    try:
        return date.fromisoformat(str(value)[:10])
    except ValueError:
        raise BadRequest(f"missing or invalid {name} params", "decode error") from None


def ids(text: str | None, name: str, most: int) -> list[int]:
    """A comma-separated list of at most ``most`` integers (none when absent)."""
    if not text:
        return []
    found = [integer(part, name) for part in text.split(",") if part.strip()]
    if len(found) > most:
        raise BadRequest(f"{name}: at most {most} values")
    return found


def items(body: dict[str, Any], key: str, most: int) -> list[dict[str, Any]]:
    """A body's list of 1 to ``most`` objects under ``key``."""
    found = body.get(key)
    if not isinstance(found, list) or not 1 <= len(found) <= most:
        raise BadRequest(f"{key}: 1 to {most} items required")
    if not all(isinstance(i, dict) for i in found):
        raise BadRequest(f"{key}: items must be objects")
    return found


def history_window(data: SellerData, params: dict[str, Any], a: str, b: str) -> tuple[date, date]:
    """The days an expectation's ``a`` and ``b`` parameters name (dates or date-times); either
    left out: the first or last day of the seller's dated history."""
    days = data.history_days
    start = params.get(a) or days[0]
    end = params.get(b) or days[-1]
    return (date.fromisoformat(str(start)[:10]), date.fromisoformat(str(end)[:10]))
