"""DescribeConfigs (key 32): read the configuration of topics, brokers and broker loggers.

Valid versions 1-4 (Kafka 4.0 removed version 0, KIP-896; ``is_default`` is still declared
for it, as in the spec). Version 4 is the first flexible version.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import BOOL, INT8, INT16, INT32, STRING, Array, Struct, f, message

_DESCRIBE_CONFIGS_RESOURCE = Struct(
    [
        f("resource_type", INT8),
        f("resource_name", STRING),
        f("configuration_keys", Array(STRING), nullable="0+"),
    ]
)

REQUEST = message(
    "DescribeConfigsRequest",
    ApiKey.DESCRIBE_CONFIGS,
    "1-4",
    "4+",
    [
        f("resources", Array(_DESCRIBE_CONFIGS_RESOURCE)),
        f("include_synonyms", BOOL, "1+"),
        f("include_documentation", BOOL, "3+"),
    ],
)

_DESCRIBE_CONFIGS_SYNONYM = Struct(
    [
        f("name", STRING, "1+"),
        f("value", STRING, "1+", nullable="0+"),
        f("source", INT8, "1+"),
    ]
)
_DESCRIBE_CONFIGS_RESOURCE_RESULT = Struct(
    [
        f("name", STRING),
        f("value", STRING, nullable="0+"),
        f("read_only", BOOL),
        f("config_source", INT8, "1+", default=-1),
        f("is_default", BOOL, "0"),
        f("is_sensitive", BOOL),
        f("synonyms", Array(_DESCRIBE_CONFIGS_SYNONYM), "1+"),
        f("config_type", INT8, "3+"),
        f("documentation", STRING, "3+", nullable="0+"),
    ]
)
_DESCRIBE_CONFIGS_RESULT = Struct(
    [
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+"),
        f("resource_type", INT8),
        f("resource_name", STRING),
        f("configs", Array(_DESCRIBE_CONFIGS_RESOURCE_RESULT)),
    ]
)

RESPONSE = message(
    "DescribeConfigsResponse",
    ApiKey.DESCRIBE_CONFIGS,
    "1-4",
    "4+",
    [
        f("throttle_time_ms", INT32),
        f("results", Array(_DESCRIBE_CONFIGS_RESULT)),
    ],
)
