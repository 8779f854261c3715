"""WB API tokens: parse the JWT's claims (no signature check) and mint tokens of the same shape.

A WB token is a JWT whose payload carries ``sid`` (seller UUID: the account WB counts limits
for, so our bucket key), ``id`` (token UUID), ``exp``, ``acc`` (1 Base, 2 Test, 3 Personal,
4 Service), ``t`` (true for Test tokens) and ``s`` (category bitmask, bit N = ``1 << N``).

The client cannot verify WB's signature (it has no WB key), so ``parse_token`` only checks the
shape, the expiry and the claims; the emulator, which signs its own tokens, uses
``verify_token``. No message, repr or log line produced here ever contains the token.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import IntEnum, StrEnum
from typing import Any

import jwt

from wbsync.errors import TokenError

__all__ = [
    "Category",
    "TokenType",
    "WbToken",
    "mint_token",
    "parse_token",
    "token_expiry",
    "verify_token",
]

#: WB tokens live 180 days.
DEFAULT_LIFETIME = timedelta(days=180)
_ALGORITHM = "HS256"


class TokenType(StrEnum):
    """WB's token types; they decide which rate-limit table applies."""

    BASE = "base"
    TEST = "test"
    PERSONAL = "personal"
    SERVICE = "service"


_ACC_TO_TYPE = {1: TokenType.BASE, 2: TokenType.TEST, 3: TokenType.PERSONAL, 4: TokenType.SERVICE}
_TYPE_TO_ACC = {v: k for k, v in _ACC_TO_TYPE.items()}


class Category(IntEnum):
    """Bits of the token's ``s`` claim: method categories (and the read-only flag)."""

    CONTENT = 1
    ANALYTICS = 2
    PRICES = 3
    MARKETPLACE = 4
    STATISTICS = 5
    PROMOTION = 6
    FEEDBACKS = 7
    CHAT = 9
    SUPPLIES = 10
    RETURNS = 11
    DOCUMENTS = 12
    FINANCE = 13
    USERS = 16
    READ_ONLY = 30

    @property
    def label(self) -> str:
        """Lower-case name used in messages and on the command line."""
        return self.name.lower()

    @classmethod
    def parse(cls, name: str) -> Category:
        """The category called ``name`` (case-insensitive, e.g. ``"finance"``)."""
        try:
            return cls[name.strip().upper().replace("-", "_")]
        except KeyError:
            known = ", ".join(c.label for c in cls)
            raise ValueError(f"unknown token category {name!r}; known: {known}") from None


def categories_to_mask(categories: Iterable[Category]) -> int:
    """The ``s`` bitmask for ``categories``."""
    mask = 0
    for cat in categories:
        mask |= 1 << int(cat)
    return mask


def mask_to_categories(mask: int) -> frozenset[Category]:
    """The known categories whose bit is set in ``mask`` (unknown bits are ignored)."""
    return frozenset(c for c in Category if mask & (1 << int(c)))


@dataclass(frozen=True, slots=True)
class WbToken:
    """A parsed WB token. Its repr and str never show the token itself."""

    seller_id: str
    token_id: str
    type: TokenType
    categories: frozenset[Category]
    expires_at: datetime
    _raw: str = field(repr=False, compare=False)

    @property
    def read_only(self) -> bool:
        """True when the token may only call reading methods (bit 30)."""
        return Category.READ_ONLY in self.categories

    def has(self, category: Category) -> bool:
        """True when the token's bitmask grants ``category``."""
        return category in self.categories

    def expired(self, now: datetime | None = None) -> bool:
        """True when ``exp`` has passed."""
        return (now or datetime.now(UTC)) >= self.expires_at

    def authorization(self) -> str:
        """The value of the ``Authorization`` header. Never log it."""
        return self._raw

    def __repr__(self) -> str:
        cats = ", ".join(sorted(c.label for c in self.categories))
        return (
            f"WbToken(seller={self.seller_id}, type={self.type.value}, categories=[{cats}], "
            f"expires={self.expires_at.isoformat()})"
        )

    __str__ = __repr__


class _Malformed(Exception):
    """What is wrong with a token's shape; the caller's ``TokenError`` names the cabinet."""


def _claims_to_token(claims: Mapping[str, Any], raw: str) -> WbToken:
    sid, tid, acc, mask, exp = (claims.get(k) for k in ("sid", "id", "acc", "s", "exp"))
    if not isinstance(sid, str) or not _is_uuid(sid):
        raise _Malformed("claim 'sid' (seller id) is missing or not a UUID")
    if tid is not None and not isinstance(tid, str):
        raise _Malformed("claim 'id' is not a string")
    if not isinstance(acc, int) or isinstance(acc, bool) or acc not in _ACC_TO_TYPE:
        raise _Malformed("claim 'acc' (token type) is missing or not one of 1, 2, 3, 4")
    if not isinstance(mask, int) or isinstance(mask, bool) or mask < 0:
        raise _Malformed("claim 's' (categories) is missing or not a non-negative integer")
    if not isinstance(exp, int | float) or isinstance(exp, bool):
        raise _Malformed("claim 'exp' is missing or not a number")
    if "t" in claims and not isinstance(claims["t"], bool):
        raise _Malformed("claim 't' is not a boolean")
    return WbToken(
        seller_id=sid,
        token_id=tid or "",
        type=_ACC_TO_TYPE[acc],
        categories=mask_to_categories(mask),
        expires_at=datetime.fromtimestamp(exp, UTC),
        _raw=raw,
    )


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def _clean(raw: str) -> str:
    raw = raw.strip()
    if raw[:7].lower() == "bearer ":
        raw = raw[7:].strip()
    return raw


PARSED_MAX = 10_000
"""Parsed tokens kept, by their text (the least recently used go first): a job parses its
cabinet's token at every run, ~60 us each, and the fan-out every active cabinet's at each pass."""


@functools.lru_cache(maxsize=PARSED_MAX)
def _parsed(raw: str) -> WbToken:
    """The token's claims, expiry not checked; ``_Malformed`` (never cached) if it has none."""
    if raw.count(".") != 2:
        raise _Malformed("not a JWT (three dot-separated parts)")
    try:
        claims = jwt.decode(raw, options={"verify_signature": False, "verify_exp": False})
    except jwt.PyJWTError:
        raise _Malformed("cannot decode its JWT parts") from None
    return _claims_to_token(claims, raw)


def parse_token(raw: str, *, cabinet: str | None = None, now: datetime | None = None) -> WbToken:
    """Read a WB token's claims without checking the signature; reject malformed or expired ones.

    Raises ``TokenError`` (naming ``cabinet``, never showing the token). A token's claims are
    read once and kept (``PARSED_MAX``); its expiry is checked at every call.
    """
    try:
        token = _parsed(_clean(raw))
    except _Malformed as exc:
        raise TokenError(f"malformed WB token: {exc}", cabinet=cabinet) from None
    if token.expired(now):
        raise TokenError(
            f"WB token expired at {token.expires_at.isoformat()}; issue a new one", cabinet=cabinet
        )
    return token


def token_expiry(raw: str) -> datetime | None:
    """The token's ``exp``, expired or not; None for a malformed token."""
    try:
        return _parsed(_clean(raw)).expires_at
    except _Malformed:
        return None


def verify_token(raw: str, key: str | bytes, *, now: datetime | None = None) -> WbToken:
    """Check the signature with ``key`` (the emulator's own) and the claims; ``TokenError`` if not.

    The error message says what is wrong (malformed, signature, expired) in WB's words, so the
    emulator can put it into its 401 detail.
    """
    raw = _clean(raw)
    try:
        claims = jwt.decode(
            raw, key, algorithms=[_ALGORITHM], options={"verify_exp": False, "require": ["exp"]}
        )
    except jwt.InvalidSignatureError:
        raise TokenError("token is malformed: signature is invalid") from None
    except jwt.PyJWTError as exc:
        raise TokenError(f"token is malformed: {type(exc).__name__}") from None
    try:
        token = _claims_to_token(claims, raw)
    except _Malformed as exc:
        raise TokenError(f"malformed WB token: {exc}") from None
    if token.expired(now):
        raise TokenError("token is expired")
    return token


def mint_token(
    *,
    key: str | bytes,
    seller_id: str,
    token_type: TokenType = TokenType.PERSONAL,
    categories: Iterable[Category] = (),
    lifetime: timedelta = DEFAULT_LIFETIME,
    token_id: str | None = None,
    now: datetime | None = None,
) -> str:
    """Issue a token in WB's JWT shape, signed HS256 with ``key`` (for the emulator and tests).

    WB signs with ES256; our client never checks signatures, so the algorithm only has to match
    what ``verify_token`` (the emulator) expects.
    """
    issued = now or datetime.now(UTC)
    claims: dict[str, Any] = {
        "ent": 1,
        "exp": int((issued + lifetime).timestamp()),
        "id": token_id or str(uuid.uuid4()),
        "iid": 0,
        "oid": 0,
        "s": categories_to_mask(categories),
        "sid": seller_id,
        "t": token_type is TokenType.TEST,
        "uid": 0,
        "acc": _TYPE_TO_ACC[token_type],
    }
    if token_type is TokenType.PERSONAL:
        claims["for"] = "self"
    return jwt.encode(claims, key, algorithm=_ALGORITHM, headers={"kid": "wbsync-emulator"})
