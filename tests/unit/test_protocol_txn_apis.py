"""Schemas of the transaction coordinator's APIs: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
DescribeTransactions, ListTransactions.

The shared checks of ``protocol_crosscheck`` for every valid version (round trips; the schema
against Kafka's JSON; the wire bytes against kafka-python's JSON-driven codec both ways and
against the hand-written legacy classes), then what is particular to these APIs.
"""

from __future__ import annotations

import pytest
from riverlog.protocol.api_keys import ApiKey
from riverlog.protocol.messages import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    describe_transactions,
    end_txn,
    list_transactions,
)
from riverlog.protocol.schema import MAX_VERSION, Message
from support import protocol_crosscheck as crosscheck
from support.protocol_samples import roundtrip

pytestmark = [
    pytest.mark.unit,
    pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning"),
]

MODULES = [add_partitions_to_txn, add_offsets_to_txn, end_txn, describe_transactions, list_transactions]
MESSAGES: list[Message] = [m for mod in MODULES for m in (mod.REQUEST, mod.RESPONSE)]
# Kafka 4.x's tables (EndTxn 5 is transaction version 2).
EXPECTED = {
    ApiKey.ADD_PARTITIONS_TO_TXN: ((0, 5), (3, MAX_VERSION)),
    ApiKey.ADD_OFFSETS_TO_TXN: ((0, 4), (3, MAX_VERSION)),
    ApiKey.END_TXN: ((0, 5), (3, MAX_VERSION)),
    ApiKey.DESCRIBE_TRANSACTIONS: ((0, 0), (0, MAX_VERSION)),
    ApiKey.LIST_TRANSACTIONS: ((0, 2), (0, MAX_VERSION)),
}
LEGACY_COVERAGE = {"AddPartitionsToTxn": range(0, 2), "AddOffsetsToTxn": range(0, 2), "EndTxn": range(0, 2)}

CASES = crosscheck.cases(MESSAGES)

test_version_ranges = crosscheck.version_ranges_test(MODULES, EXPECTED)
test_schema_matches_kafka_json = crosscheck.schema_matches_kafka_json_test(MESSAGES)
test_roundtrip_populated = crosscheck.roundtrip_populated_test(CASES)
test_roundtrip_nulls = crosscheck.roundtrip_nulls_test(CASES)
test_missing_keys_take_defaults = crosscheck.missing_keys_take_defaults_test(CASES)
test_kafka_python_json_codec_agrees = crosscheck.kafka_python_json_codec_test(
    CASES, ("kafka.protocol.producer.transaction", "kafka.protocol.admin"))

LEGACY_CASES = crosscheck.legacy_cases(MESSAGES)
test_legacy_cross_check_coverage = crosscheck.legacy_cross_check_coverage_test(LEGACY_CASES, LEGACY_COVERAGE)
test_legacy_codec_agrees = crosscheck.legacy_codec_test(LEGACY_CASES)


def test_end_txn_v5_answers_the_producer_id_and_epoch() -> None:
    body = {"throttle_time_ms": 0, "error_code": 0, "producer_id": 12, "producer_epoch": 3}
    assert roundtrip(end_txn.RESPONSE, 5, body)["producer_epoch"] == 3
    assert roundtrip(end_txn.RESPONSE, 4, body)["producer_id"] == -1  # not on the wire before 5


def test_add_partitions_client_and_broker_forms() -> None:
    topics = [{"name": "t", "partitions": [0, 1]}]
    v3 = roundtrip(add_partitions_to_txn.REQUEST, 3, {
        "v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": 7, "v3_and_below_producer_epoch": 2,
        "v3_and_below_topics": topics, "transactions": [{"transactional_id": "ignored"}]})
    assert v3["v3_and_below_transactional_id"] == "tx" and v3["transactions"] == []
    v4 = roundtrip(add_partitions_to_txn.REQUEST, 4, {"transactions": [
        {"transactional_id": "tx", "producer_id": 7, "producer_epoch": 2, "verify_only": True, "topics": topics}]})
    assert v4["transactions"][0]["verify_only"] is True and v4["v3_and_below_transactional_id"] == ""
