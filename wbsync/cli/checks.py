"""What ``cabinets check`` (and ``add``/``import --check``) run and print: one line a section.

Each line is ``<section> <status> <host>, category <c> granted|NOT granted[, WB said: ...]``
followed by the limits the token's type gets there; the JSON shape is ``CabinetCheck.as_dict``
(docs/cli.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import typer

from wbsync.cli.running import configured_settings

if TYPE_CHECKING:
    from wbsync.cabinets.cabinet_check import CabinetCheck, SectionCheck
    from wbsync.store import Cabinet

__all__ = ["check_cabinets", "check_tokens", "render"]


def _limits(section: SectionCheck) -> str:
    parts = []
    for method, limit in section.limits.items():
        if limit is None:
            parts.append(f"{method} not for this token type")
        else:
            rate = f"{limit['limit']:g} per {limit['period_s']:g} s, burst {limit['burst']:g}"
            parts.append(f"{method} {rate}")
    return "; ".join(parts)


def _section_line(section: SectionCheck) -> str:
    if section.category is None:
        category = "any category"
    else:
        granted = "granted" if section.granted else "NOT granted"
        category = f"category {section.category} {granted}"
    said = f", WB said: {section.words}" if section.words and not section.ok else ""
    line = f"  {section.section:<11} {section.status:<11} {section.host}, {category}{said}"
    limits = _limits(section)
    return f"{line}; limits: {limits}" if limits else line


def render(check: CabinetCheck) -> list[str]:
    """The human report of one cabinet: a head line, the seller, one line a section."""
    ident = f"cabinet {check.cabinet_id} " if check.cabinet_id is not None else "cabinet "
    days = check.expires_in_days
    when = f"{-days} days ago" if check.expired else f"in {days} days"
    head = (
        f"{ident}{check.name!r}: {check.token_type} token, expires "
        f"{check.expires_at.date().isoformat()} ({when})"
    )
    seller = check.seller
    if seller.status == "confirmed":
        about = f"{seller.name} ({seller.sid})"
    elif seller.status == "mismatch":
        about = f"WB says {seller.name} ({seller.sid}); the cabinet claims {seller.claimed}"
    else:
        about = f"WB said: {seller.words}" if seller.words else ""
    lines = [head, f"  {'seller':<11} {seller.status:<11} {about}".rstrip()]
    lines += [_section_line(s) for s in check.sections]
    return lines


def warn_expiry(checks: Sequence[CabinetCheck]) -> None:
    """A warning on stderr for each token within ``EXPIRY_WARNING_DAYS`` of expiry or past it."""
    for check in checks:
        if check.expiring_soon:
            days = check.expires_in_days
            when = "has expired" if check.expired else f"expires in {days} days"
            typer.echo(f"warning: cabinet {check.name!r}: the token {when}", err=True)


async def check_cabinets(ref: int | str | None) -> list[CabinetCheck]:
    """Check one cabinet (``ref``) or, with None, every cabinet, through the shared buckets."""
    from functools import partial

    from wbsync.cabinets.cabinet_check import check_cabinet, check_many
    from wbsync.shared.runtime import open_runtime

    async with open_runtime(configured_settings()) as runtime:
        cabinets: list[Cabinet] = (
            await runtime.store.cabinets.list()
            if ref is None
            else [await runtime.store.cabinets.get(ref)]
        )
        return await check_many([partial(check_cabinet, runtime, c) for c in cabinets])


async def check_tokens(named: Sequence[tuple[str, str]]) -> list[CabinetCheck]:
    """Check tokens not stored yet, each as (cabinet name, token)."""
    from functools import partial

    from wbsync.cabinets.cabinet_check import check_many, check_new_token
    from wbsync.shared.runtime import open_runtime

    async with open_runtime(configured_settings()) as runtime:
        return await check_many([partial(check_new_token, runtime, n, t) for n, t in named])
