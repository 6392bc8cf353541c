"""BrokerRegistration (key 62): a broker registers an incarnation with the KRaft controller
(KIP-631) and gets its broker epoch.

Kafka 4.x: valid versions 0-4, flexible in all. Version 1 adds ``is_migrating_zk_broker``
(KIP-866), 2 the log directories (KIP-858), 3 the previous broker epoch (KIP-966); version 4 is
wire-identical to 3.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import BOOL, INT16, INT32, INT64, STRING, UINT16, UUID, Array, Struct, f, message

_LISTENER = Struct(
    [
        f("name", STRING),
        f("host", STRING),
        f("port", UINT16),
        f("security_protocol", INT16),
    ]
)
_FEATURE = Struct(
    [
        f("name", STRING),
        f("min_supported_version", INT16),
        f("max_supported_version", INT16),
    ]
)

REQUEST = message(
    "BrokerRegistrationRequest",
    ApiKey.BROKER_REGISTRATION,
    "0-4",
    "0+",
    [
        f("broker_id", INT32),
        f("cluster_id", STRING),
        f("incarnation_id", UUID),
        f("listeners", Array(_LISTENER)),
        f("features", Array(_FEATURE)),
        # Nullable without a null default in the spec: a missing key is sent as null anyway.
        f("rack", STRING, nullable="0+"),
        f("is_migrating_zk_broker", BOOL, "1+"),
        f("log_dirs", Array(UUID), "2+"),
        f("previous_broker_epoch", INT64, "3+", default=-1),
    ],
)

RESPONSE = message(
    "BrokerRegistrationResponse",
    ApiKey.BROKER_REGISTRATION,
    "0-4",
    "0+",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("broker_epoch", INT64, default=-1),
    ],
)
