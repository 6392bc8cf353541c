"""Heartbeat (key 12): a classic group member tells its coordinator it is alive.

Valid versions 0-4; version 4 is the first flexible version.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT16, INT32, NULL, STRING, f, message

REQUEST = message(
    "HeartbeatRequest",
    ApiKey.HEARTBEAT,
    "0-4",
    "4+",
    [
        f("group_id", STRING),
        f("generation_id", INT32),
        f("member_id", STRING),
        f("group_instance_id", STRING, "3+", nullable="3+", default=NULL),
    ],
)

RESPONSE = message(
    "HeartbeatResponse",
    ApiKey.HEARTBEAT,
    "0-4",
    "4+",
    [
        f("throttle_time_ms", INT32, "1+"),
        f("error_code", INT16),
    ],
)
