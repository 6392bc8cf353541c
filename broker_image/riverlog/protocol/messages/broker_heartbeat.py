"""BrokerHeartbeat (key 63): a registered broker keeps its session with the KRaft controller
alive, reports its metadata offset and asks to be unfenced or shut down (KIP-631).

Kafka 4.x: valid versions 0-2, flexible in all. Version 1 adds the tagged offline log
directories (KIP-858), version 2 the tagged cordoned log directories (null: not reported).
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import BOOL, INT16, INT32, INT64, NULL, UUID, Array, f, message

REQUEST = message(
    "BrokerHeartbeatRequest",
    ApiKey.BROKER_HEARTBEAT,
    "0-2",
    "0+",
    [
        f("broker_id", INT32),
        f("broker_epoch", INT64, default=-1),
        f("current_metadata_offset", INT64),
        f("want_fence", BOOL),
        f("want_shut_down", BOOL),
        f("offline_log_dirs", Array(UUID), "1+", tag=0, tagged="1+"),
        f("cordoned_log_dirs", Array(UUID), "2+", nullable="2+", tag=1, tagged="2+", default=NULL),
    ],
)

RESPONSE = message(
    "BrokerHeartbeatResponse",
    ApiKey.BROKER_HEARTBEAT,
    "0-2",
    "0+",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("is_caught_up", BOOL),
        # A broker is fenced until the controller says otherwise.
        f("is_fenced", BOOL, default=True),
        f("should_shut_down", BOOL),
    ],
)
