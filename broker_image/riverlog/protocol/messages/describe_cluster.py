"""DescribeCluster (key 60): cluster id, controller and brokers (or controllers), for admin clients.

Kafka 4.x: valid versions 0-2, flexible in all. Version 1 adds the endpoint type (KIP-919:
1 = brokers, 2 = controllers), 2 fenced brokers (KIP-1073).
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import BOOL, INT8, INT16, INT32, NULL, STRING, Array, Struct, f, message

ENDPOINT_TYPE_BROKERS = 1
ENDPOINT_TYPE_CONTROLLERS = 2
# Kafka's "no authorized operations requested" sentinel (Integer.MIN_VALUE).
AUTHORIZED_OPERATIONS_OMITTED = -2147483648

REQUEST = message(
    "DescribeClusterRequest",
    ApiKey.DESCRIBE_CLUSTER,
    "0-2",
    "0+",
    [
        f("include_cluster_authorized_operations", BOOL),
        f("endpoint_type", INT8, "1+", default=ENDPOINT_TYPE_BROKERS),
        f("include_fenced_brokers", BOOL, "2+"),
    ],
)

_DESCRIBE_CLUSTER_BROKER = Struct(
    [
        f("broker_id", INT32),
        f("host", STRING),
        f("port", INT32),
        f("rack", STRING, nullable="0+", default=NULL),
        f("is_fenced", BOOL, "2+"),
    ]
)

RESPONSE = message(
    "DescribeClusterResponse",
    ApiKey.DESCRIBE_CLUSTER,
    "0-2",
    "0+",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+", default=NULL),
        f("endpoint_type", INT8, "1+", default=ENDPOINT_TYPE_BROKERS),
        f("cluster_id", STRING),
        f("controller_id", INT32, default=-1),
        f("brokers", Array(_DESCRIBE_CLUSTER_BROKER)),
        f("cluster_authorized_operations", INT32, default=AUTHORIZED_OPERATIONS_OMITTED),
    ],
)
