"""TxnOffsetCommit (key 28): a transactional producer commits consumed offsets for a group.

Sent to the group coordinator after AddOffsetsToTxn; the offsets stay pending until the
transaction's marker reaches the group's ``__consumer_offsets`` partition. Valid versions 0-5
(Kafka 4.x): version 2 adds the leader epoch, version 3 (first flexible) the member id,
generation and group instance id, version 4 only allows TRANSACTION_ABORTABLE in answers, and
version 5 (transaction version 2, KIP-890) also adds the group to the transaction.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT16, INT32, INT64, NULL, STRING, Array, Struct, f, message

_REQUEST_PARTITION = Struct(
    [
        f("partition_index", INT32),
        f("committed_offset", INT64),
        f("committed_leader_epoch", INT32, "2+", default=-1),
        f("committed_metadata", STRING, nullable="0+"),
    ]
)
_REQUEST_TOPIC = Struct(
    [
        f("name", STRING),
        f("partitions", Array(_REQUEST_PARTITION)),
    ]
)

REQUEST = message(
    "TxnOffsetCommitRequest",
    ApiKey.TXN_OFFSET_COMMIT,
    "0-5",
    "3+",
    [
        f("transactional_id", STRING),
        f("group_id", STRING),
        f("producer_id", INT64),
        f("producer_epoch", INT16),
        f("generation_id", INT32, "3+", default=-1),
        f("member_id", STRING, "3+", default=""),
        f("group_instance_id", STRING, "3+", nullable="3+", default=NULL),
        f("topics", Array(_REQUEST_TOPIC)),
    ],
)

_RESPONSE_PARTITION = Struct(
    [
        f("partition_index", INT32),
        f("error_code", INT16),
    ]
)
_RESPONSE_TOPIC = Struct(
    [
        f("name", STRING),
        f("partitions", Array(_RESPONSE_PARTITION)),
    ]
)

RESPONSE = message(
    "TxnOffsetCommitResponse",
    ApiKey.TXN_OFFSET_COMMIT,
    "0-5",
    "3+",
    [
        f("throttle_time_ms", INT32),
        f("topics", Array(_RESPONSE_TOPIC)),
    ],
)
