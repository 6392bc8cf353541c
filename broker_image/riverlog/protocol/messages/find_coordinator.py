"""FindCoordinator (key 10): which broker coordinates a group (key type 0), a transactional id
(1) or a share group (2). Versions 0-3 ask for one key; version 4+ batch several
(``coordinator_keys`` in, ``coordinators`` out).

Valid versions 0-6; version 3 is the first flexible version.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT8, INT16, INT32, STRING, Array, Struct, f, message

REQUEST = message(
    "FindCoordinatorRequest",
    ApiKey.FIND_COORDINATOR,
    "0-6",
    "3+",
    [
        f("key", STRING, "0-3"),
        f("key_type", INT8, "1+"),
        f("coordinator_keys", Array(STRING), "4+"),
    ],
)

_COORDINATOR = Struct(
    [
        f("key", STRING, "4+"),
        f("node_id", INT32, "4+"),
        f("host", STRING, "4+"),
        f("port", INT32, "4+"),
        f("error_code", INT16, "4+"),
        f("error_message", STRING, "4+", nullable="4+"),
    ]
)

RESPONSE = message(
    "FindCoordinatorResponse",
    ApiKey.FIND_COORDINATOR,
    "0-6",
    "3+",
    [
        f("throttle_time_ms", INT32, "1+"),
        f("error_code", INT16, "0-3"),
        f("error_message", STRING, "1-3", nullable="1-3"),
        f("node_id", INT32, "0-3"),
        f("host", STRING, "0-3"),
        f("port", INT32, "0-3"),
        f("coordinators", Array(_COORDINATOR), "4+"),
    ],
)
