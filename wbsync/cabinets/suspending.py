"""Suspending what WB refuses for good: the job's side (``SuspensionGate``) and the fan-out's
(``SuspendedFilter``).

WB's first refusal for good (``wbsync.wb.refusals``) suspends what it applies to, the whole
cabinet (a dead token) or one (cabinet, section), and ends the job as completed with the outcome
``{"outcome": "needs_attention", ...}``: no attempt spent, nothing retried. A cabinet whose
stored token has expired is suspended (kind ``expired``) before anything is sent.

The fan-out enqueues nothing suspended (one read of every suspension per read of the active
cabinets). Once a suspension's probe time comes (``WBSYNC_SUSPENSION_PROBE_S`` after it was
stored or renewed) the fan-out lets its cabinet through again; the first job to run claims the
probe in the database (moving the probe time on), so one job per probe interval asks WB: WB
accepting lifts the suspension, refusing renews it. The cabinet's other jobs that were let
through meanwhile end as ``needs_attention`` without a request. A new token lifts a cabinet's
suspensions (``CabinetRepository.replace_token``); so does ``wbsync cabinets resume``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from wbsync.store import Cabinet, Store, Suspension
from wbsync.store.schema import utcnow
from wbsync.syncs import SYNCS, Sync
from wbsync.wb.refusals import Refusal, lifted_by
from wbsync.wb.tokens import token_expiry

__all__ = [
    "NEEDS_ATTENTION",
    "PROBE_FIELD",
    "Admission",
    "SuspendedFilter",
    "SuspensionGate",
    "resume",
    "sections_of",
]

audit = logging.getLogger("wbsync.audit")

log = logging.getLogger(__name__)

NEEDS_ATTENTION = "needs_attention"
"""The ``outcome`` of a job ended by a suspension (BullMQ: completed, with this return value)."""
PROBE_FIELD = "probe"
"""In a job's data: this job holds its cabinet's probe (kept over its deferrals and retries)."""


def sections_of(sync: Sync) -> frozenset[str]:
    """The WB sections ``sync`` calls."""
    return frozenset(ep.section.name for ep in (*sync.calls, *sync.also_calls))


def _relevant(suspensions: Iterable[Suspension], sections: frozenset[str]) -> list[Suspension]:
    return [s for s in suspensions if s.section is None or s.section in sections]


def _due(suspensions: Sequence[Suspension], now: datetime) -> bool:
    return all(s.probe_at is not None and s.probe_at <= now for s in suspensions)


@dataclass(frozen=True, slots=True)
class Admission:
    """What the gate decided for one run: ``held`` (the outcome to end with, nothing sent), or
    go, as the probe of ``probing`` when that is not empty."""

    held: dict[str, Any] | None = None
    probing: list[Suspension] = field(default_factory=list)


def needs_attention(
    suspension: Suspension | None, *, kind: str, section: str | None, words: str | None, **more: Any
) -> dict[str, Any]:
    """A job's return value when a suspension ended it."""
    probe_at = suspension.probe_at if suspension is not None else None
    return {
        "outcome": NEEDS_ATTENTION,
        "kind": kind,
        "section": section,
        "words": words,
        "probe_at": probe_at.isoformat() if probe_at is not None else None,
        "lifts": lifted_by(kind),
        **more,
    }


class SuspensionGate:
    """Decides whether a job may ask WB, suspends on a refusal for good, and lifts on a probe
    WB accepted. ``probe_ms``: the (scaled) probe interval."""

    def __init__(self, store: Store, *, probe_ms: float) -> None:
        if probe_ms <= 0:
            raise ValueError("probe_ms must be > 0")
        self._store = store
        self._probe = timedelta(milliseconds=probe_ms)

    async def admit(self, sync: Sync, cabinet: Cabinet, data: Mapping[str, Any]) -> Admission:
        """Go, go as the probe, or hold (expired token; a suspension whose probe is not due or
        was taken by another job)."""
        expired = await self._expired(cabinet)
        if expired is not None:
            return Admission(held=expired)
        if cabinet.suspended is False:  # read with the cabinet: none, no query
            return Admission()
        relevant = _relevant(await self._store.suspended.of_cabinet(cabinet.id), sections_of(sync))
        if not relevant:
            return Admission()
        if data.get(PROBE_FIELD):
            return Admission(probing=relevant)
        now = utcnow()
        if _due(relevant, now):
            claimed = [
                await self._store.suspended.claim_probe(
                    cabinet.id, s.section, due=s.probe_at, next_at=now + self._probe
                )
                for s in relevant
                if s.probe_at is not None
            ]
            if all(claimed):
                log.info("cabinet %s: %s probes WB's suspension", cabinet.name, sync.name)
                return Admission(probing=relevant)
        first = relevant[0]
        log.info(
            "cabinet %s: %s not run, %s suspended (%s); lifted by %s",
            cabinet.name,
            sync.name,
            first.section or "the whole cabinet",
            first.kind,
            lifted_by(first.kind),
        )
        held = needs_attention(
            first, kind=first.kind, section=first.section, words=first.words, sent=0
        )
        return Admission(held=held)

    async def _expired(self, cabinet: Cabinet) -> dict[str, Any] | None:
        """The outcome of a cabinet whose stored token has expired (suspended, never sent);
        a token's unknown expiry is read from it and kept."""
        expires = cabinet.token_expires_at
        if expires is None:
            expires = token_expiry(cabinet.token())
            if expires is None:
                return None  # malformed: the client says so
            await self._store.cabinets.set_token_expiry(cabinet.id, expires)
        if expires > utcnow():
            return None
        suspension = await self._store.suspended.suspend(
            cabinet.id, None, kind="expired", words=None, probe_at=None
        )
        log.warning(
            "cabinet %s: its token expired at %s; suspended, nothing sent; lifted by %s",
            cabinet.name,
            expires.isoformat(),
            lifted_by("expired"),
        )
        return needs_attention(suspension, kind="expired", section=None, words=None, sent=0)

    async def suspend(self, cabinet: Cabinet, sync: Sync, refusal: Refusal) -> dict[str, Any]:
        """Store (or renew) the suspension ``refusal`` calls for; the job's outcome."""
        probe_at = utcnow() + self._probe
        suspension = await self._store.suspended.suspend(
            cabinet.id, refusal.section, kind=refusal.kind, words=refusal.words, probe_at=probe_at
        )
        log.warning(
            "cabinet %s: WB refused %s for good (%s, status %s; WB said %r): %s suspended, no "
            "attempt spent; lifted by %s",
            cabinet.name,
            refusal.method,
            refusal.kind,
            refusal.status,
            refusal.words,
            refusal.section or "the whole cabinet",
            refusal.lifts,
        )
        reason = (
            f"NeedsAttention: {refusal.section or 'the whole cabinet'} suspended ({refusal.kind}) "
            f"after WB refused {refusal.method} with {refusal.status}; WB said: "
            f'"{refusal.words or ""}"; lifted by {refusal.lifts}'
        )
        await self._store.runs.failed(cabinet.id, sync.name, reason=reason, attempts=0)
        return needs_attention(
            suspension,
            kind=refusal.kind,
            section=refusal.section,
            words=refusal.words,
            method=refusal.method,
            status=refusal.status,
        )

    async def accepted(self, cabinet: Cabinet, probing: Sequence[Suspension]) -> None:
        """WB accepted the probe: lift what it probed."""
        for suspension in probing:
            if await self._store.suspended.lift_one(cabinet.id, suspension.section):
                log.info(
                    "cabinet %s: WB accepted the probe; %s suspension (%s) lifted",
                    cabinet.name,
                    suspension.section or "the whole cabinet's",
                    suspension.kind,
                )


class SuspendedFilter:
    """The fan-out's view of the suspensions: read once per read of the active cabinets."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._by_cabinet: dict[str, list[Suspension]] = {}
        self._sections = {name: sections_of(sync) for name, sync in SYNCS.items()}
        self._now = utcnow()

    async def refresh(self, cabinets: Sequence[Cabinet]) -> None:
        """Read every suspension (one query); suspend the cabinets whose stored token has
        expired and that are not suspended for it yet."""
        by_cabinet: dict[str, list[Suspension]] = {}
        for suspension in await self._store.suspensions():
            by_cabinet.setdefault(str(suspension.cabinet_id), []).append(suspension)
        self._now = now = utcnow()
        for cabinet in cabinets:
            expires = cabinet.token_expires_at
            key = str(cabinet.id)
            if expires is None or expires > now:
                continue
            if any(s.kind == "expired" for s in by_cabinet.get(key, ())):
                continue
            held = await self._store.suspended.suspend(
                cabinet.id, None, kind="expired", words=None, probe_at=None
            )
            if held is not None:
                log.warning(
                    "cabinet %s: its token expired at %s; suspended, nothing sent; lifted by %s",
                    cabinet.name,
                    expires.isoformat(),
                    lifted_by("expired"),
                )
                by_cabinet.setdefault(key, []).append(held)
        self._by_cabinet = by_cabinet

    def blocks(self, queue: str, cabinet: str) -> bool:
        """True when a suspension in force covers ``queue``'s sections for the cabinet and its
        probe is not due."""
        held = self._by_cabinet.get(cabinet)
        if not held:
            return False
        relevant = _relevant(held, self._sections.get(queue, frozenset()))
        return bool(relevant) and not _due(relevant, self._now)


async def resume(
    store: Store, cabinet: Cabinet, section: str | None, *, by: str
) -> list[Suspension]:
    """Lift the cabinet's suspensions (all, or ``section``'s only) by hand, and say so in one
    audit line (``wbsync.audit``) naming ``by``, who lifted them; what was lifted.

    WARNING: what WB refused may now be asked again; the log must show who allowed it.
    """
    lifted = await store.lift_suspensions(cabinet.id, section)
    audit.warning(
        "cabinet %d %r resumed by hand by %s: %d suspension(s) lifted%s",
        cabinet.id,
        cabinet.name,
        by,
        len(lifted),
        f" in section {section}" if section else "",
        extra={"cabinet": str(cabinet.id)},
    )
    return lifted
