"""AddOffsetsToTxn (key 25): a transactional producer will commit offsets of a consumer group in
its transaction (``sendOffsetsToTransaction``); the coordinator adds the group's
``__consumer_offsets`` partition to the transaction.

Kafka 4.x: valid versions 0-4, flexible from 3.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT16, INT32, INT64, STRING, f, message

REQUEST = message(
    "AddOffsetsToTxnRequest",
    ApiKey.ADD_OFFSETS_TO_TXN,
    "0-4",
    "3+",
    [
        f("transactional_id", STRING),
        f("producer_id", INT64),
        f("producer_epoch", INT16),
        f("group_id", STRING),
    ],
)

RESPONSE = message(
    "AddOffsetsToTxnResponse",
    ApiKey.ADD_OFFSETS_TO_TXN,
    "0-4",
    "3+",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
    ],
)
