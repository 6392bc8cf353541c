"""AlterConfigs (key 33): replace the whole configuration of resources (the legacy, non-incremental
form; see IncrementalAlterConfigs).

Valid versions 0-2; version 2 is the first flexible version.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import BOOL, INT8, INT16, INT32, STRING, Array, Struct, f, message

_ALTERABLE_CONFIG = Struct(
    [
        f("name", STRING),
        f("value", STRING, nullable="0+"),
    ]
)
_ALTER_CONFIGS_RESOURCE = Struct(
    [
        f("resource_type", INT8),
        f("resource_name", STRING),
        f("configs", Array(_ALTERABLE_CONFIG)),
    ]
)

REQUEST = message(
    "AlterConfigsRequest",
    ApiKey.ALTER_CONFIGS,
    "0-2",
    "2+",
    [
        f("resources", Array(_ALTER_CONFIGS_RESOURCE)),
        f("validate_only", BOOL),
    ],
)

_ALTER_CONFIGS_RESOURCE_RESPONSE = Struct(
    [
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+"),
        f("resource_type", INT8),
        f("resource_name", STRING),
    ]
)

RESPONSE = message(
    "AlterConfigsResponse",
    ApiKey.ALTER_CONFIGS,
    "0-2",
    "2+",
    [
        f("throttle_time_ms", INT32),
        f("responses", Array(_ALTER_CONFIGS_RESOURCE_RESPONSE)),
    ],
)
