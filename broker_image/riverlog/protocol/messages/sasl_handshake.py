"""SaslHandshake (key 17): the client names the SASL mechanism it will authenticate with.

Valid versions 0-1, never flexible. Version 1 means the SASL tokens that follow travel in
SaslAuthenticate requests (version 0's bare tokens are not served: every current client sends 1).
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT16, STRING, Array, f, message

REQUEST = message(
    "SaslHandshakeRequest",
    ApiKey.SASL_HANDSHAKE,
    "0-1",
    "none",
    [f("mechanism", STRING)],
)

RESPONSE = message(
    "SaslHandshakeResponse",
    ApiKey.SASL_HANDSHAKE,
    "0-1",
    "none",
    [
        f("error_code", INT16),
        f("mechanisms", Array(STRING)),
    ],
)
