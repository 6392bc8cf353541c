"""AlterUserScramCredentials (key 51): add, replace or remove users' SCRAM credentials.

Only version 0, flexible. An upsertion carries the password already salted by the client
(PBKDF2 with its salt and iterations); the controller keeps stored and server keys only.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import BYTES, INT8, INT16, INT32, STRING, Array, Struct, f, message

REQUEST = message(
    "AlterUserScramCredentialsRequest",
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
    "0",
    "0+",
    [
        f("deletions", Array(Struct([f("name", STRING), f("mechanism", INT8)]))),
        f("upsertions", Array(Struct([
            f("name", STRING),
            f("mechanism", INT8),
            f("iterations", INT32),
            f("salt", BYTES),
            f("salted_password", BYTES),
        ]))),
    ],
)

RESPONSE = message(
    "AlterUserScramCredentialsResponse",
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
    "0",
    "0+",
    [
        f("throttle_time_ms", INT32),
        f("results", Array(Struct([
            f("user", STRING),
            f("error_code", INT16),
            f("error_message", STRING, nullable="0+"),
        ]))),
    ],
)
