"""Transaction markers: the control batches a partition leader writes when a transaction ends.

A marker batch has attributes transactional|control, the producer's id and epoch, base sequence
-1 and one record (Kafka's EndTransactionMarker)::

    key   = version int16 (0) | type int16 (0 abort, 1 commit)
    value = version int16 (0) | coordinator epoch int32

Pure: no I/O.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..errors import KafkaError
from .batch_header import HEADER_SIZE, NO_SEQUENCE, BatchHeader, Buffer
from .build import NewRecord, build_batch
from .compression import decompress
from .record_fields import read_bytes_field, read_varint

ABORT = 0
COMMIT = 1
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


@dataclass(frozen=True, slots=True)
class TxnMarker:
    committed: bool
    coordinator_epoch: int


def build_txn_marker(
    *, producer_id: int, producer_epoch: int, coordinator_epoch: int, committed: bool, timestamp: int
) -> bytes:
    """One control batch holding the end-of-transaction marker (base offset 0: the log assigns it)."""
    record = NewRecord(
        key=_KEY.pack(0, COMMIT if committed else ABORT),
        value=_VALUE.pack(0, coordinator_epoch),
        timestamp=timestamp,
    )
    return build_batch(
        [record],
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=NO_SEQUENCE,
        transactional=True,
        control=True,
    )


def parse_txn_marker(buf: Buffer, header: BatchHeader) -> TxnMarker | None:
    """The marker in the control batch at ``header`` (its bytes in ``buf``, CRC already checked);
    None for any other control record (an unknown type, a batch emptied by compaction, a record
    that does not parse)."""
    if not header.is_control or header.record_count < 1:
        return None
    try:
        payload = decompress(header.compression, bytes(buf[header.position + HEADER_SIZE : header.end]))
        _length, pos = read_varint(payload, 0)
        pos += 1  # record attributes
        _timestamp_delta, pos = read_varint(payload, pos)
        _offset_delta, pos = read_varint(payload, pos)
        key, pos = read_bytes_field(payload, pos)
        value, pos = read_bytes_field(payload, pos)
    except (KafkaError, IndexError, ValueError):
        return None
    if key is None or len(key) < _KEY.size or value is None or len(value) < _VALUE.size:
        return None
    _key_version, kind = _KEY.unpack_from(key, 0)
    if kind not in (ABORT, COMMIT):
        return None
    _value_version, coordinator_epoch = _VALUE.unpack_from(value, 0)
    return TxnMarker(kind == COMMIT, coordinator_epoch)
