"""EndTxn (key 26): commit or abort the producer's open transaction.

Kafka 4.x lists versions 0-5 (flexible from 3). Version 5 means the client speaks transaction
version 2 (KIP-890 part 2: the coordinator bumps the epoch at every transaction end and answers
with the new producer id and epoch).
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import BOOL, INT16, INT32, INT64, STRING, f, message

REQUEST = message(
    "EndTxnRequest",
    ApiKey.END_TXN,
    "0-5",
    "3+",
    [
        f("transactional_id", STRING),
        f("producer_id", INT64),
        f("producer_epoch", INT16),
        f("committed", BOOL),
    ],
)

RESPONSE = message(
    "EndTxnResponse",
    ApiKey.END_TXN,
    "0-5",
    "3+",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("producer_id", INT64, "5+", default=-1),
        f("producer_epoch", INT16, "5+", default=-1),
    ],
)
