"""``__transaction_state`` record formats, byte for byte as Kafka's ``TransactionLogKey`` and
``TransactionLogValue`` specs lay them out, and the placement of transactional ids on its
partitions (Java's String.hashCode, Kafka's Utils.abs)."""

from __future__ import annotations

import struct

import pytest
from riverlog.protocol.primitives import DecodeError
from riverlog.transactions.placement import partition_for
from riverlog.transactions.records import (
    TxnLogRecord,
    UnknownTxnRecord,
    decode,
    decode_key,
    decode_value,
    encode,
    encode_key,
    encode_value,
)
from riverlog.transactions.state import TxnState, TxnTransit

pytestmark = pytest.mark.unit


def s16(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def compact_str(text: str) -> bytes:
    data = text.encode()
    return bytes([len(data) + 1]) + data  # uvarint length + 1 (short strings: one byte)


def transit(state: TxnState, partitions: frozenset[tuple[str, int]] = frozenset(), **changes: int) -> TxnTransit:
    values = {"producer_id": 1000, "prev_producer_id": -1, "next_producer_id": -1, "producer_epoch": 3,
              "last_producer_epoch": -1, "timeout_ms": 60_000, "start_ms": 1_700_000_000_000,
              "last_update_ms": 1_700_000_000_500, "client_transaction_version": 0}
    values.update(changes)
    return TxnTransit(state=state, partitions=partitions, **values)


def test_key_is_type_0_then_a_classic_string() -> None:
    assert encode_key("tx-1") == struct.pack(">h", 0) + s16("tx-1")
    assert decode_key(encode_key("tx-1")) == "tx-1"


def test_unknown_key_type_is_refused() -> None:
    with pytest.raises(UnknownTxnRecord):
        decode_key(struct.pack(">h", 1) + s16("x"))


def test_value_version_1_layout() -> None:
    value = transit(TxnState.ONGOING, frozenset({("orders", 1), ("orders", 0), ("audit", 2)}),
                    prev_producer_id=999)
    expected = (
        struct.pack(">hqhib", 1, 1000, 3, 60_000, 1)  # version, producer id, epoch, timeout, status
        + bytes([3])  # compact array of 2 topics
        + compact_str("audit") + bytes([2]) + struct.pack(">i", 2) + b"\x00"
        + compact_str("orders") + bytes([3]) + struct.pack(">ii", 0, 1) + b"\x00"
        + struct.pack(">qq", 1_700_000_000_500, 1_700_000_000_000)  # last update, start
        + bytes([1, 0, 8]) + struct.pack(">q", 999)  # one tagged field: tag 0, 8 bytes, previous id
    )
    assert encode_value(value) == expected
    assert decode_value(expected) == value


def test_value_version_0_layout_is_read() -> None:
    # Kafka with transaction.version 0 writes a classic struct without tagged fields.
    data = (struct.pack(">hqhib", 0, 7, 0, 900_000, 4)
            + struct.pack(">i", 1) + s16("t") + struct.pack(">ii", 1, 5)
            + struct.pack(">qq", 20, 10))
    assert decode_value(data) == transit(TxnState.COMPLETE_COMMIT, frozenset({("t", 5)}), producer_id=7,
                                         producer_epoch=0, timeout_ms=900_000, start_ms=10, last_update_ms=20)
    assert encode_value(decode_value(data), version=0) == data


def test_empty_state_writes_null_partitions_and_defaults_no_tags() -> None:
    value = transit(TxnState.EMPTY, start_ms=-1)
    data = encode_value(value)
    assert data == (struct.pack(">hqhib", 1, 1000, 3, 60_000, 0) + b"\x00"  # null compact array
                    + struct.pack(">qq", 1_700_000_000_500, -1) + b"\x00")
    assert decode_value(data) == value


def test_tagged_fields_round_trip_and_unknown_tags_are_skipped() -> None:
    value = transit(TxnState.PREPARE_ABORT, frozenset({("t", 0)}), prev_producer_id=5, next_producer_id=6,
                    client_transaction_version=2)
    data = encode_value(value)
    assert decode_value(data) == value
    tags = (bytes([3, 0, 8]) + struct.pack(">q", 5) + bytes([1, 8]) + struct.pack(">q", 6)
            + bytes([2, 2]) + struct.pack(">h", 2))
    assert data is not None and data.endswith(tags)
    # A later Kafka's extra tag (say 3, an int16) is read past.
    extended = data[:-len(tags)] + bytes([4]) + tags[1:] + bytes([3, 2]) + struct.pack(">h", 9)
    assert decode_value(extended) == value


def test_tombstone_and_whole_record() -> None:
    record = TxnLogRecord("tx-9", None)
    key, value = encode(record)
    assert value is None
    assert decode(key, value) == record
    full = TxnLogRecord("tx-9", transit(TxnState.COMPLETE_ABORT, start_ms=5))
    assert decode(*encode(full)) == full


def test_bad_versions_and_statuses() -> None:
    with pytest.raises(UnknownTxnRecord):
        decode_value(struct.pack(">h", 2) + bytes(40))
    bad_status = bytearray(encode_value(transit(TxnState.COMPLETE_ABORT)) or b"")
    bad_status[2 + 8 + 2 + 4] = 9
    with pytest.raises(DecodeError):
        decode_value(bytes(bad_status))
    with pytest.raises(ValueError):
        encode_value(transit(TxnState.EMPTY, frozenset({("t", 0)})))


@pytest.mark.parametrize(("transactional_id", "partitions", "expected"), [
    ("hello", 50, 99162322 % 50),
    ("", 50, 0),
    ("polygenelubricants", 50, 0),  # hashCode is Integer.MIN_VALUE: Utils.abs makes it 0
    ("Aa", 50, 2112 % 50),  # "Aa" and "BB" collide in Java, so they share a coordinator
    ("BB", 50, 2112 % 50),
    ("\U0001F600", 7, (0xD83D * 31 + 0xDE00) % 7),  # UTF-16 code units
    ("my-transactional-id", 1, 0),
])
def test_partition_for_matches_kafka(transactional_id: str, partitions: int, expected: int) -> None:
    assert partition_for(transactional_id, partitions) == expected
