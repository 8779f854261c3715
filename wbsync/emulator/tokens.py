"""Tokens as WB describes them, for the emulator: its own reading, written from WB's documents.

WB's API information page: a token is a JWT with ``sid`` (seller UUID), ``id`` (token UUID),
``exp``, ``acc`` (1 Base, 2 Test, 3 Personal, 4 Service), ``t`` (true for Test tokens), ``for``
(``self`` for Personal, ``asid:<service>`` for Service) and ``s`` (a bitmask: bit N is
``1 << N``). The emulator signs its tokens HS256 with its own key (WB signs ES256); the client
never checks signatures, so only the claims have to be WB's.

Deliberately independent of ``wbsync.wb.tokens``: the emulator must not share the client's
assumptions. Callers may pass the client's enums (they are ``str`` and ``int``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

import jwt

__all__ = [
    "ACC",
    "CATEGORY_BITS",
    "EmuToken",
    "Kind",
    "TokenRefused",
    "category_bit",
    "mint",
    "verify",
]

LIFETIME = timedelta(days=180)
_ALGORITHM = "HS256"


class Kind(StrEnum):
    """WB's token types (the ``acc`` claim)."""

    BASE = "base"
    TEST = "test"
    PERSONAL = "personal"
    SERVICE = "service"


#: ``acc`` claim of each token type.
ACC: dict[Kind, int] = {Kind.BASE: 1, Kind.TEST: 2, Kind.PERSONAL: 3, Kind.SERVICE: 4}
_KIND_OF_ACC = {v: k for k, v in ACC.items()}

#: Bits of the ``s`` claim, by WB's category names.
CATEGORY_BITS: dict[str, int] = {
    "content": 1,
    "analytics": 2,
    "prices": 3,
    "marketplace": 4,
    "statistics": 5,
    "promotion": 6,
    "feedbacks": 7,
    "chat": 9,
    "supplies": 10,
    "returns": 11,
    "documents": 12,
    "finance": 13,
    "users": 16,
    "read_only": 30,
}
_READ_ONLY = CATEGORY_BITS["read_only"]


def category_bit(category: str | int) -> int:
    """The ``s`` bit of a category given by name (``"finance"``) or number (13)."""
    if isinstance(category, int):
        return int(category)
    name = category.strip().lower().replace("-", "_")
    if name not in CATEGORY_BITS:
        raise ValueError(f"unknown token category {category!r}; known: {', '.join(CATEGORY_BITS)}")
    return CATEGORY_BITS[name]


class TokenRefused(Exception):
    """A token WB would refuse with 401; the message is the detail after ``token problem;``."""


@dataclass(frozen=True, slots=True)
class EmuToken:
    """A verified token's claims that WB's gateway looks at."""

    seller: str
    kind: Kind
    mask: int
    token_id: str = ""
    """The token's own id (``id``): what the seller revokes in WB's portal."""

    def has(self, bit: int) -> bool:
        """True when the ``s`` bitmask has ``bit``."""
        return bool(self.mask & (1 << bit))

    @property
    def read_only(self) -> bool:
        """True for a read-only token."""
        return self.has(_READ_ONLY)


def verify(header: str, key: str, *, now: datetime | None = None) -> EmuToken:
    """The claims of an ``Authorization`` header's token signed with ``key``; ``TokenRefused``
    (in WB's words) if it is malformed, foreign or expired."""
    raw = header.strip()
    if raw[:7].lower() == "bearer ":
        raw = raw[7:].strip()
    try:
        claims: dict[str, Any] = jwt.decode(
            raw, key, algorithms=[_ALGORITHM], options={"verify_exp": False, "require": ["exp"]}
        )
    except jwt.InvalidSignatureError:
        raise TokenRefused("token is malformed: signature is invalid") from None
    except jwt.PyJWTError as exc:
        raise TokenRefused(f"token is malformed: {type(exc).__name__}") from None
    sid, acc, mask, exp = (claims.get(k) for k in ("sid", "acc", "s", "exp"))
    if not isinstance(sid, str) or not _is_uuid(sid):
        raise TokenRefused("token is malformed: no seller id")
    if acc not in _KIND_OF_ACC or not isinstance(mask, int) or isinstance(mask, bool):
        raise TokenRefused("token is malformed: bad acc or s claim")
    if not isinstance(exp, int | float) or exp <= (now or datetime.now(UTC)).timestamp():
        raise TokenRefused("token is expired")
    tid = claims.get("id")
    return EmuToken(
        seller=sid, kind=_KIND_OF_ACC[acc], mask=mask, token_id=tid if isinstance(tid, str) else ""
    )


def token_id(raw: str) -> str:
    """The ``id`` claim of a token (signature not checked); "" when it has none."""
    raw = raw.strip()
    if raw[:7].lower() == "bearer ":
        raw = raw[7:].strip()
    try:
        claims = jwt.decode(raw, options={"verify_signature": False, "verify_exp": False})
    except jwt.PyJWTError:
        return ""
    tid = claims.get("id")
    return tid if isinstance(tid, str) else ""


def mint(
    *,
    key: str,
    seller: str,
    kind: str = Kind.PERSONAL,
    categories: Iterable[str | int] = (),
    lifetime: timedelta = LIFETIME,
) -> str:
    """A token in WB's JWT shape signed with ``key``: ``categories`` by name or bit number."""
    token_kind = Kind(str(kind))
    mask = 0
    for category in categories:
        mask |= 1 << category_bit(category)
    claims: dict[str, Any] = {
        "acc": ACC[token_kind],
        "ent": 1,
        "exp": int((datetime.now(UTC) + lifetime).timestamp()),
        "id": str(uuid.uuid4()),
        "iid": 0,
        "oid": 0,
        "s": mask,
        "sid": seller,
        "t": token_kind is Kind.TEST,
        "uid": 0,
    }
    if token_kind is Kind.PERSONAL:
        claims["for"] = "self"
    if token_kind is Kind.SERVICE:
        claims["for"] = "asid:wbsync-emulator"
    return jwt.encode(claims, key, algorithm=_ALGORITHM, headers={"kid": "wbsync-emulator"})


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True
