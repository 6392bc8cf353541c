"""ReadShareGroupStateSummary (key 87): the share coordinator's summary of share-partitions --
state epoch, leader epoch and start offset, no batches -- for describing a group's offsets.
Broker-to-broker; versions 0-1, flexible; version 1 adds the delivery-complete count (KIP-1226)
from which lag is computed, ignorable.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT16, INT32, INT64, NULL, STRING, UUID, Array, Struct, f, message

REQUEST = message(
    "ReadShareGroupStateSummaryRequest",
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
    "0-1",
    "0+",
    [
        f("group_id", STRING),
        f(
            "topics",
            Array(
                Struct(
                    [
                        f("topic_id", UUID),
                        f("partitions", Array(Struct([f("partition", INT32), f("leader_epoch", INT32)]))),
                    ]
                )
            ),
        ),
    ],
)

_PARTITION_RESULT = Struct(
    [
        f("partition", INT32),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+", default=NULL),
        f("state_epoch", INT32),
        f("leader_epoch", INT32),
        f("start_offset", INT64),
        f("delivery_complete_count", INT32, "1+", default=-1),
    ]
)

RESPONSE = message(
    "ReadShareGroupStateSummaryResponse",
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
    "0-1",
    "0+",
    [
        f(
            "results",
            Array(Struct([f("topic_id", UUID), f("partitions", Array(_PARTITION_RESULT))])),
        )
    ],
)
