"""WriteTxnMarkers' schema (the shared protocol cross-checks) and the marker control batch."""

from __future__ import annotations

import pytest
from riverlog.protocol.api_keys import ApiKey
from riverlog.protocol.messages import MESSAGES, write_txn_markers
from riverlog.protocol.record_batch import (
    NewRecord,
    TxnMarker,
    build_batch,
    build_txn_marker,
    decode_records,
    parse_txn_marker,
    read_header,
)
from riverlog.protocol.schema import MAX_VERSION
from support import protocol_crosscheck as crosscheck
from support.protocol_samples import roundtrip

pytestmark = [
    pytest.mark.unit,
    pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning"),
]

MODULES = [write_txn_markers]
MESSAGES_UNDER_TEST = [write_txn_markers.REQUEST, write_txn_markers.RESPONSE]
CASES = crosscheck.cases(MESSAGES_UNDER_TEST)

test_version_ranges = crosscheck.version_ranges_test(MODULES, {ApiKey.WRITE_TXN_MARKERS: ((1, 2), (1, MAX_VERSION))})
test_schema_matches_kafka_json = crosscheck.schema_matches_kafka_json_test(MESSAGES_UNDER_TEST)
test_roundtrip_populated = crosscheck.roundtrip_populated_test(CASES)
test_roundtrip_nulls = crosscheck.roundtrip_nulls_test(CASES)
test_missing_keys_take_defaults = crosscheck.missing_keys_take_defaults_test(CASES)


def test_registered_and_v2_carries_the_transaction_version() -> None:
    assert MESSAGES[ApiKey.WRITE_TXN_MARKERS][0] is write_txn_markers.REQUEST
    marker = {"producer_id": 7, "producer_epoch": 3, "transaction_result": True, "coordinator_epoch": 5,
              "transaction_version": 2, "topics": [{"name": "t", "partition_indexes": [0, 2]}]}
    assert roundtrip(write_txn_markers.REQUEST, 2, {"markers": [marker]})["markers"][0] == marker
    v1 = roundtrip(write_txn_markers.REQUEST, 1, {"markers": [marker]})["markers"][0]
    assert v1["transaction_version"] == 0 and v1["transaction_result"] is True


@pytest.mark.parametrize("committed", [True, False])
def test_marker_batch_layout(committed: bool) -> None:
    data = build_txn_marker(producer_id=42, producer_epoch=4, coordinator_epoch=9, committed=committed,
                            timestamp=1234)
    header = read_header(data)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence, header.record_count) == (42, 4, -1, 1)
    (record,) = decode_records(data, header)
    # Kafka's EndTransactionMarker: key = version 0 + type (0 abort, 1 commit); value = version 0 + epoch.
    assert record.key == (b"\x00\x00\x00\x01" if committed else b"\x00\x00\x00\x00")
    assert record.value == b"\x00\x00\x00\x00\x00\x09"
    assert record.timestamp == 1234
    assert parse_txn_marker(data, header) == TxnMarker(committed, 9)


def test_other_batches_are_not_markers() -> None:
    data = build_batch([NewRecord(b"v", b"k")], producer_id=1, producer_epoch=0, base_sequence=0, transactional=True)
    assert parse_txn_marker(data, read_header(data)) is None
    unknown = build_batch([NewRecord(b"\x00\x00\x00\x00\x00\x00", b"\x00\x00\x00\x05")], control=True,
                          transactional=True, producer_id=1, producer_epoch=0)
    assert parse_txn_marker(unknown, read_header(unknown)) is None
