"""ListTransactions (key 66): the transactional ids a coordinator knows, filtered by state,
producer id, running time (v1+) and a transactional id pattern (v2+, KIP-1152, a Java regular
expression that must match the whole id).

Kafka 4.x: valid versions 0-2, flexible.
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import INT16, INT32, INT64, NULL, STRING, Array, Struct, f, message

REQUEST = message(
    "ListTransactionsRequest",
    ApiKey.LIST_TRANSACTIONS,
    "0-2",
    "0+",
    [
        f("state_filters", Array(STRING)),
        f("producer_id_filters", Array(INT64)),
        f("duration_filter", INT64, "1+", default=-1),
        f("transactional_id_pattern", STRING, "2+", nullable="2+", default=NULL),
    ],
)

_TRANSACTION_STATE = Struct(
    [
        f("transactional_id", STRING),
        f("producer_id", INT64),
        f("transaction_state", STRING),
    ]
)

RESPONSE = message(
    "ListTransactionsResponse",
    ApiKey.LIST_TRANSACTIONS,
    "0-2",
    "0+",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("unknown_state_filters", Array(STRING)),
        f("transaction_states", Array(_TRANSACTION_STATE)),
    ],
)
