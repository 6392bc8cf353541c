"""SaslAuthenticate (key 36): one SASL token each way, until the mechanism is done.

Valid versions 0-2, flexible from 2. Version 1 adds ``session_lifetime_ms`` (KIP-368): how long
the authenticated session lasts before the client must re-authenticate on the same connection.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import BYTES, INT16, INT64, STRING, f, message

REQUEST = message(
    "SaslAuthenticateRequest",
    ApiKey.SASL_AUTHENTICATE,
    "0-2",
    "2+",
    [f("auth_bytes", BYTES)],
)

RESPONSE = message(
    "SaslAuthenticateResponse",
    ApiKey.SASL_AUTHENTICATE,
    "0-2",
    "2+",
    [
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+"),
        f("auth_bytes", BYTES),
        f("session_lifetime_ms", INT64, "1+", default=0),
    ],
)
