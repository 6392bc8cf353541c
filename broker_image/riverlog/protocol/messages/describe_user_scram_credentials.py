"""DescribeUserScramCredentials (key 50): which SCRAM mechanisms each user has, with iterations.

Only version 0, flexible. ``users`` null or empty: every user with a credential.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT8, INT16, INT32, NULL, STRING, Array, Struct, f, message

REQUEST = message(
    "DescribeUserScramCredentialsRequest",
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
    "0",
    "0+",
    [f("users", Array(Struct([f("name", STRING)])), nullable="0+", default=NULL)],
)

_INFO = Struct([f("mechanism", INT8), f("iterations", INT32)])
_RESULT = Struct(
    [
        f("user", STRING),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+"),
        f("credential_infos", Array(_INFO)),
    ]
)

RESPONSE = message(
    "DescribeUserScramCredentialsResponse",
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
    "0",
    "0+",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+"),
        f("results", Array(_RESULT)),
    ],
)
