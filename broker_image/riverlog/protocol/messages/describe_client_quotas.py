"""DescribeClientQuotas (key 48): the client quotas whose entity matches a filter.

Versions 0-1 (1 flexible). Per entity type the filter matches an exact name (0), the default
entity (1) or any entity of the type (2); ``strict`` leaves out entities with other types too.
A null entity name is the default entity.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import BOOL, FLOAT64, INT8, INT16, INT32, STRING, Array, Struct, f, message

REQUEST = message(
    "DescribeClientQuotasRequest",
    ApiKey.DESCRIBE_CLIENT_QUOTAS,
    "0-1",
    "1+",
    [
        f("components", Array(Struct([
            f("entity_type", STRING),
            f("match_type", INT8),
            f("match", STRING, nullable="0+"),
        ]))),
        f("strict", BOOL),
    ],
)

_ENTITY = Struct([f("entity_type", STRING), f("entity_name", STRING, nullable="0+")])

RESPONSE = message(
    "DescribeClientQuotasResponse",
    ApiKey.DESCRIBE_CLIENT_QUOTAS,
    "0-1",
    "1+",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+"),
        f("entries", Array(Struct([
            f("entity", Array(_ENTITY)),
            f("values", Array(Struct([f("key", STRING), f("value", FLOAT64)]))),
        ])), nullable="0+"),
    ],
)
