"""Encryption of cabinet tokens at rest, with a key derived from ``WBSYNC_SECRET_KEY``."""

from __future__ import annotations

import base64
from collections import OrderedDict

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from wbsync.errors import ConfigError

__all__ = ["OPENED_MAX", "TokenCipher"]

OPENED_MAX = 10_000
"""Decrypted tokens a cipher keeps, by ciphertext (the least recently used go first): a job
reads its cabinet's token at every run, and decryption is most of the cabinet's cost."""

# Fixed and public on purpose: they separate this key from any other use of the same secret;
# the secret itself is what must stay private.
_SALT = b"wbsync/store/cabinet-token/v1"
_INFO = b"fernet key for cabinet tokens"

_NO_KEY = (
    "cabinet tokens are stored encrypted and no key is configured: set WBSYNC_SECRET_KEY "
    "(any long random string, e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')"
)
_WRONG_KEY = (
    "a cabinet token cannot be decrypted: WBSYNC_SECRET_KEY differs from the key the token was "
    "stored with (restore that key, or re-add the cabinet with its token)"
)


class TokenCipher:
    """Fernet encryption of tokens; the key is derived from the configured secret by HKDF.

    Built without a secret it still exists, so listing cabinets works; encrypting or decrypting
    then raises ConfigError saying which setting to set. A ciphertext decrypted once is not
    decrypted again while it is among the last ``opened_max`` (a replaced token is a new
    ciphertext; a cipher has one key for its life).
    """

    def __init__(self, secret_key: str | None, *, opened_max: int = OPENED_MAX) -> None:
        if opened_max < 1:
            raise ValueError(f"opened_max must be >= 1, got {opened_max}")
        self._opened: OrderedDict[str, str] = OrderedDict()
        self._opened_max = opened_max
        self._fernet: Fernet | None = None
        if secret_key:
            hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=_SALT, info=_INFO)
            key = hkdf.derive(secret_key.encode("utf-8"))
            self._fernet = Fernet(base64.urlsafe_b64encode(key))

    def __repr__(self) -> str:
        return f"TokenCipher(configured={self.configured})"

    @property
    def configured(self) -> bool:
        """True when a secret key was given."""
        return self._fernet is not None

    def opens(self, sealed: str) -> bool:
        """True if ``sealed`` was encrypted with this key (False without a key)."""
        if self._fernet is None:
            return False
        try:
            self._fernet.decrypt(sealed.encode("ascii"))
        except (InvalidToken, ValueError):
            return False
        return True

    def _require(self) -> Fernet:
        if self._fernet is None:
            raise ConfigError(_NO_KEY)
        return self._fernet

    def encrypt(self, token: str) -> str:
        """The ciphertext of ``token`` (ASCII, different on every call)."""
        return self._require().encrypt(token.encode("utf-8")).decode("ascii")

    def decrypt(self, sealed: str) -> str:
        """The token sealed in ``sealed``; ConfigError if the key does not match."""
        token = self._opened.get(sealed)
        if token is not None:
            self._opened.move_to_end(sealed)
            return token
        try:
            token = self._require().decrypt(sealed.encode("ascii")).decode("utf-8")
        except InvalidToken:
            raise ConfigError(_WRONG_KEY) from None
        self._opened[sealed] = token
        if len(self._opened) > self._opened_max:
            self._opened.popitem(last=False)
        return token

    @property
    def opened(self) -> int:
        """How many decrypted tokens are kept."""
        return len(self._opened)
