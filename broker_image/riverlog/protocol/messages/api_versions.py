"""ApiVersions (key 18): the first request of every client, answered with header v0 always."""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import BOOL, INT16, INT32, INT64, STRING, Array, Struct, f, message

REQUEST = message(
    "ApiVersionsRequest",
    ApiKey.API_VERSIONS,
    "0-4",
    "3+",
    [
        f("client_software_name", STRING, "3+"),
        f("client_software_version", STRING, "3+"),
    ],
)

_API = Struct(
    [
        f("api_key", INT16),
        f("min_version", INT16),
        f("max_version", INT16),
    ]
)
_SUPPORTED_FEATURE = Struct(
    [f("name", STRING), f("min_version", INT16), f("max_version", INT16)]
)
_FINALIZED_FEATURE = Struct(
    [f("name", STRING), f("max_version_level", INT16), f("min_version_level", INT16)]
)

RESPONSE = message(
    "ApiVersionsResponse",
    ApiKey.API_VERSIONS,
    "0-4",
    "3+",
    [
        f("error_code", INT16),
        f("api_keys", Array(_API)),
        f("throttle_time_ms", INT32, "1+"),
        f("supported_features", Array(_SUPPORTED_FEATURE), "3+", tag=0, tagged="3+"),
        f("finalized_features_epoch", INT64, "3+", tag=1, tagged="3+", default=-1),
        f("finalized_features", Array(_FINALIZED_FEATURE), "3+", tag=2, tagged="3+"),
        f("zk_migration_ready", BOOL, "3+", tag=3, tagged="3+"),
    ],
)
