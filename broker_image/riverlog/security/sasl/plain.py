"""SASL PLAIN (RFC 4616) on the server side, as Kafka's PlainServerCallbackHandler checks it.

One message, ``[authzid] NUL username NUL password``; the authorization id, when given, must be
the username. Passwords come from the listener's JAAS options ``user_<name>="<password>"``.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable

from .errors import SaslAuthenticationError

MECHANISM = "PLAIN"


class PlainServer:
    def __init__(self, password_of: Callable[[str], str | None]) -> None:
        self._password_of = password_of
        self.mechanism = MECHANISM
        self.username = ""
        self.done = False
        self.credential_expires_at_ms: int | None = None  # passwords do not expire
        self._used = False

    def step(self, token: bytes, now_ms: int = 0) -> bytes:
        if self._used:
            raise SaslAuthenticationError(MECHANISM, "an unexpected message")
        self._used = True
        try:
            authzid, username, password = token.decode("utf-8").split("\0")
        except (UnicodeDecodeError, ValueError):
            raise SaslAuthenticationError(MECHANISM, "a malformed message") from None
        if not username or (authzid and authzid != username):
            raise SaslAuthenticationError(MECHANISM, "invalid credentials")
        expected = self._password_of(username)
        # Compared in constant time, and an unknown user costs the same comparison.
        if not hmac.compare_digest(password.encode(), (expected if expected is not None else "\0").encode()) \
                or expected is None:
            raise SaslAuthenticationError(MECHANISM, "invalid credentials")
        self.username = username
        self.done = True
        return b""
