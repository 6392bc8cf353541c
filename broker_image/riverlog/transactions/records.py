"""The records of ``__transaction_state``, in Kafka's formats (``TransactionLogKey`` and
``TransactionLogValue`` in Kafka's ``transaction-coordinator/src/main/resources/common/message``).

- key: int16 0 (the coordinator record type of the transaction log) then the transactional id
  as a classic (int16-length) string;
- value: int16 version, then ``TransactionLogValue``. Version 0 is a classic struct; version 1
  (Kafka's from ``transaction.version`` 1) is flexible and adds tagged fields: previous producer
  id (tag 0), next producer id (tag 1) and the client's transaction version (tag 2). Riverlog
  writes version 1 and reads both; unknown tags (later Kafka versions) are skipped.
- a null value (tombstone) removes an expired transactional id.

The partitions are grouped by topic; an Empty transaction writes them as null.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from ..protocol.primitives import DecodeError, Reader, Writer
from ..protocol.schema import INT8, INT16, INT32, INT64, STRING, Array, Struct, f
from .state import TopicPartition, TxnState, TxnTransit

TRANSACTION_LOG_KEY_TYPE = 0
VALUE_VERSION = 1
_FLEXIBLE_FROM = 1
_MAX_VALUE_VERSION = 1

_KEY = Struct([f("transactional_id", STRING)])

_PARTITIONS = Struct([
    f("topic", STRING),
    f("partition_ids", Array(INT32)),
])

_VALUE = Struct([
    f("producer_id", INT64),
    f("previous_producer_id", INT64, "1+", tag=0, tagged="1+", default=-1),
    f("next_producer_id", INT64, "1+", tag=1, tagged="1+", default=-1),
    f("producer_epoch", INT16),
    f("transaction_timeout_ms", INT32),
    f("transaction_status", INT8),
    f("transaction_partitions", Array(_PARTITIONS), nullable="0+"),
    f("transaction_last_update_timestamp_ms", INT64),
    f("transaction_start_timestamp_ms", INT64),
    f("client_transaction_version", INT16, "1+", tag=2, tagged="1+", default=0),
])


@dataclass(frozen=True)
class TxnLogRecord:
    """One key/value pair of ``__transaction_state``; ``value`` None is a tombstone."""

    transactional_id: str
    value: TxnTransit | None


class UnknownTxnRecord(Exception):
    """A key or value version this coordinator does not know (left alone when loading)."""


def encode_key(transactional_id: str) -> bytes:
    w = Writer()
    w.int16(TRANSACTION_LOG_KEY_TYPE)
    _KEY.encode(w, {"transactional_id": transactional_id}, False, 0, False)
    return bytes(w.buf)


def encode_value(value: TxnTransit | None, version: int = VALUE_VERSION) -> bytes | None:
    if value is None:
        return None
    if value.state == TxnState.EMPTY and value.partitions:
        raise ValueError(f"an Empty transaction has no partitions: {value}")
    partitions: list[dict[str, object]] | None = None
    if value.state != TxnState.EMPTY:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, index in sorted(value.partitions):
            by_topic[topic].append(index)
        partitions = [{"topic": t, "partition_ids": ids} for t, ids in by_topic.items()]
    w = Writer()
    w.int16(version)
    _VALUE.encode(w, {
        "producer_id": value.producer_id,
        "previous_producer_id": value.prev_producer_id,
        "next_producer_id": value.next_producer_id,
        "producer_epoch": value.producer_epoch,
        "transaction_timeout_ms": value.timeout_ms,
        "transaction_status": int(value.state),
        "transaction_partitions": partitions,
        "transaction_last_update_timestamp_ms": value.last_update_ms,
        "transaction_start_timestamp_ms": value.start_ms,
        "client_transaction_version": value.client_transaction_version,
    }, version >= _FLEXIBLE_FROM, version, False)
    return bytes(w.buf)


def encode(record: TxnLogRecord) -> tuple[bytes, bytes | None]:
    return encode_key(record.transactional_id), encode_value(record.value)


def decode_key(data: bytes | memoryview) -> str:
    r = Reader(data)
    key_type = r.int16()
    if key_type != TRANSACTION_LOG_KEY_TYPE:
        raise UnknownTxnRecord(f"transaction log key type {key_type}")
    transactional_id: str = _KEY.decode(r, False, 0, False)["transactional_id"]
    return transactional_id


def decode_value(data: bytes | memoryview | None) -> TxnTransit | None:
    if data is None:
        return None
    r = Reader(data)
    version = r.int16()
    if not 0 <= version <= _MAX_VALUE_VERSION:
        raise UnknownTxnRecord(f"TransactionLogValue version {version}")
    body = _VALUE.decode(r, version >= _FLEXIBLE_FROM, version, False)
    try:
        state = TxnState(body["transaction_status"])
    except ValueError:
        raise DecodeError(f"unknown transaction status {body['transaction_status']}") from None
    partitions: frozenset[TopicPartition] = frozenset()
    if state != TxnState.EMPTY and body["transaction_partitions"]:
        partitions = frozenset((p["topic"], index) for p in body["transaction_partitions"]
                               for index in p["partition_ids"])
    return TxnTransit(
        producer_id=body["producer_id"], prev_producer_id=body["previous_producer_id"],
        next_producer_id=body["next_producer_id"], producer_epoch=body["producer_epoch"],
        last_producer_epoch=-1, timeout_ms=body["transaction_timeout_ms"], state=state, partitions=partitions,
        start_ms=body["transaction_start_timestamp_ms"], last_update_ms=body["transaction_last_update_timestamp_ms"],
        client_transaction_version=body["client_transaction_version"])


def decode(key: bytes | memoryview, value: bytes | memoryview | None) -> TxnLogRecord:
    """Raises :class:`UnknownTxnRecord` for versions this coordinator does not know, DecodeError
    when the record is corrupt."""
    return TxnLogRecord(decode_key(key), decode_value(value))
