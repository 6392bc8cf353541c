"""DescribeTransactions (key 65): the coordinator's view of transactional ids (what
``kafka-transactions describe`` shows).

Kafka 4.x: valid version 0 only, flexible.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT16, INT32, INT64, STRING, Array, Struct, f, message

REQUEST = message(
    "DescribeTransactionsRequest",
    ApiKey.DESCRIBE_TRANSACTIONS,
    "0",
    "0+",
    [
        f("transactional_ids", Array(STRING)),
    ],
)

_TOPIC_DATA = Struct(
    [
        f("topic", STRING),
        f("partitions", Array(INT32)),
    ]
)

_TRANSACTION_STATE = Struct(
    [
        f("error_code", INT16),
        f("transactional_id", STRING),
        f("transaction_state", STRING),
        f("transaction_timeout_ms", INT32),
        f("transaction_start_time_ms", INT64),
        f("producer_id", INT64),
        f("producer_epoch", INT16),
        f("topics", Array(_TOPIC_DATA)),
    ]
)

RESPONSE = message(
    "DescribeTransactionsResponse",
    ApiKey.DESCRIBE_TRANSACTIONS,
    "0",
    "0+",
    [
        f("throttle_time_ms", INT32),
        f("transaction_states", Array(_TRANSACTION_STATE)),
    ],
)
