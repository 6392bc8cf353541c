"""AlterClientQuotas (key 49): set or remove quotas of users, client ids and their defaults.

Versions 0-1 (1 flexible). A null entity name is the default entity; an op with ``remove`` set
removes its key (its value is then ignored).
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import BOOL, FLOAT64, INT16, INT32, STRING, Array, Struct, f, message

_ENTITY = Struct([f("entity_type", STRING), f("entity_name", STRING, nullable="0+")])

REQUEST = message(
    "AlterClientQuotasRequest",
    ApiKey.ALTER_CLIENT_QUOTAS,
    "0-1",
    "1+",
    [
        f("entries", Array(Struct([
            f("entity", Array(_ENTITY)),
            f("ops", Array(Struct([f("key", STRING), f("value", FLOAT64), f("remove", BOOL)]))),
        ]))),
        f("validate_only", BOOL),
    ],
)

RESPONSE = message(
    "AlterClientQuotasResponse",
    ApiKey.ALTER_CLIENT_QUOTAS,
    "0-1",
    "1+",
    [
        f("throttle_time_ms", INT32),
        f("entries", Array(Struct([
            f("error_code", INT16),
            f("error_message", STRING, nullable="0+"),
            f("entity", Array(_ENTITY)),
        ]))),
    ],
)
