"""IncrementalAlterConfigs (key 44): set, delete, append to or subtract from individual
configuration entries (``config_operation``: 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT).

Valid versions 0-1; version 1 is the first flexible version.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import BOOL, INT8, INT16, INT32, STRING, Array, Struct, f, message

_ALTERABLE_CONFIG = Struct(
    [
        f("name", STRING),
        f("config_operation", INT8),
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
    "IncrementalAlterConfigsRequest",
    ApiKey.INCREMENTAL_ALTER_CONFIGS,
    "0-1",
    "1+",
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
    "IncrementalAlterConfigsResponse",
    ApiKey.INCREMENTAL_ALTER_CONFIGS,
    "0-1",
    "1+",
    [
        f("throttle_time_ms", INT32),
        f("responses", Array(_ALTER_CONFIGS_RESOURCE_RESPONSE)),
    ],
)
