"""AddPartitionsToTxn (key 24): a transactional producer adds partitions to its open transaction.

Kafka 4.x: valid versions 0-5, flexible from 3. Versions 0-3 are the client's form (one
transaction, ``v3_and_below_*`` fields, per-partition results); versions 4+ are sent by
partition leaders (KIP-890 part 1): several transactions per request, each possibly
``verify_only`` (is the partition already in the transaction?), with a top-level error code.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import BOOL, INT16, INT32, INT64, STRING, Array, Struct, f, message

_TOPIC = Struct(
    [
        f("name", STRING),
        f("partitions", Array(INT32)),
    ]
)

_TRANSACTION = Struct(
    [
        f("transactional_id", STRING, "4+"),
        f("producer_id", INT64, "4+"),
        f("producer_epoch", INT16, "4+"),
        f("verify_only", BOOL, "4+", default=False),
        f("topics", Array(_TOPIC), "4+"),
    ]
)

REQUEST = message(
    "AddPartitionsToTxnRequest",
    ApiKey.ADD_PARTITIONS_TO_TXN,
    "0-5",
    "3+",
    [
        f("transactions", Array(_TRANSACTION), "4+"),
        f("v3_and_below_transactional_id", STRING, "0-3"),
        f("v3_and_below_producer_id", INT64, "0-3"),
        f("v3_and_below_producer_epoch", INT16, "0-3"),
        f("v3_and_below_topics", Array(_TOPIC), "0-3"),
    ],
)

_PARTITION_RESULT = Struct(
    [
        f("partition_index", INT32),
        f("partition_error_code", INT16),
    ]
)

_TOPIC_RESULT = Struct(
    [
        f("name", STRING),
        f("results_by_partition", Array(_PARTITION_RESULT)),
    ]
)

_TRANSACTION_RESULT = Struct(
    [
        f("transactional_id", STRING, "4+"),
        f("topic_results", Array(_TOPIC_RESULT), "4+"),
    ]
)

RESPONSE = message(
    "AddPartitionsToTxnResponse",
    ApiKey.ADD_PARTITIONS_TO_TXN,
    "0-5",
    "3+",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16, "4+"),
        f("results_by_transaction", Array(_TRANSACTION_RESULT), "4+"),
        f("results_by_topic_v3_and_below", Array(_TOPIC_RESULT), "0-3"),
    ],
)
