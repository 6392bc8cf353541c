"""AllocateProducerIds (key 67): a broker asks the KRaft controller for a block of producer ids
(KIP-730).

Kafka 4.x: valid version 0 only, which is flexible.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT16, INT32, INT64, f, message

REQUEST = message(
    "AllocateProducerIdsRequest",
    ApiKey.ALLOCATE_PRODUCER_IDS,
    "0",
    "0+",
    [
        f("broker_id", INT32),
        f("broker_epoch", INT64, default=-1),
    ],
)

RESPONSE = message(
    "AllocateProducerIdsResponse",
    ApiKey.ALLOCATE_PRODUCER_IDS,
    "0",
    "0+",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("producer_id_start", INT64),  # first id of the block
        f("producer_id_len", INT32),
    ],
)
