"""InitProducerId (key 22): a producer id and epoch for idempotent and transactional producers.

Kafka 4.x: valid versions 0-5, flexible from 2. The spec lists version 6 (two-phase commit,
KIP-939) but marks it unstable (``latestVersionUnstable``), so it is not valid here; its fields are
kept, gated on version 6, so enabling it is a change of the valid range only.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import BOOL, INT16, INT32, INT64, STRING, f, message

REQUEST = message(
    "InitProducerIdRequest",
    ApiKey.INIT_PRODUCER_ID,
    "0-5",
    "2+",
    [
        f("transactional_id", STRING, nullable="0+"),
        f("transaction_timeout_ms", INT32),
        f("producer_id", INT64, "3+", default=-1),
        f("producer_epoch", INT16, "3+", default=-1),
        f("enable2_pc", BOOL, "6+", default=False),
        f("keep_prepared_txn", BOOL, "6+", default=False),
    ],
)

RESPONSE = message(
    "InitProducerIdResponse",
    ApiKey.INIT_PRODUCER_ID,
    "0-5",
    "2+",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("producer_id", INT64, default=-1),
        f("producer_epoch", INT16),
        f("ongoing_txn_producer_id", INT64, "6+", default=-1),
        f("ongoing_txn_producer_epoch", INT16, "6+", default=-1),
    ],
)
