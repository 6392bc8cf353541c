"""AlterPartition (key 56): a partition leader asks the controller to change the ISR (KIP-497).

Kafka 4.x: valid versions 2-3 (KIP-896 removed 0-1, which named topics instead of ids), flexible
in all. Version 3 sends the new ISR with each member's broker epoch (KIP-903) instead of bare ids.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT8, INT16, INT32, INT64, UUID, Array, Struct, f, message

_BROKER_STATE = Struct(
    [
        f("broker_id", INT32, "3+"),
        f("broker_epoch", INT64, "3+", default=-1),
    ]
)
_PARTITION_REQUEST = Struct(
    [
        f("partition_index", INT32),
        f("leader_epoch", INT32),
        f("new_isr", Array(INT32), "0-2"),
        f("new_isr_with_epochs", Array(_BROKER_STATE), "3+"),
        f("leader_recovery_state", INT8, "1+"),  # 0 recovered, 1 recovering (KIP-704)
        f("partition_epoch", INT32),
    ]
)
_TOPIC_REQUEST = Struct(
    [
        f("topic_id", UUID, "2+"),
        f("partitions", Array(_PARTITION_REQUEST)),
    ]
)

REQUEST = message(
    "AlterPartitionRequest",
    ApiKey.ALTER_PARTITION,
    "2-3",
    "0+",
    [
        f("broker_id", INT32),
        f("broker_epoch", INT64, default=-1),
        f("topics", Array(_TOPIC_REQUEST)),
    ],
)

_PARTITION_RESPONSE = Struct(
    [
        f("partition_index", INT32),
        f("error_code", INT16),
        f("leader_id", INT32),
        f("leader_epoch", INT32),
        f("isr", Array(INT32)),
        f("leader_recovery_state", INT8, "1+"),
        f("partition_epoch", INT32),
    ]
)
_TOPIC_RESPONSE = Struct(
    [
        f("topic_id", UUID, "2+"),
        f("partitions", Array(_PARTITION_RESPONSE)),
    ]
)

RESPONSE = message(
    "AlterPartitionResponse",
    ApiKey.ALTER_PARTITION,
    "2-3",
    "0+",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("topics", Array(_TOPIC_RESPONSE)),
    ],
)
