"""Building v2 record batches: encode records, compress the records section, write header and CRC.

Producer side (the CLI, the coordinator, the controller quorum, tests) and the log cleaner, which
re-assembles batches around the records it keeps. Pure: no I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

import crc32c

from .batch_header import (
    ATTRIBUTES_POS,
    COMPRESSION_MASK,
    CONTROL_MASK,
    CRC_POS,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    TRANSACTIONAL_MASK,
    Compression,
)
from .compression import compress
from .record_fields import Header, write_bytes_field, write_varint

_UINT32 = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class NewRecord:
    """A record to put into a batch (producer side)."""

    value: bytes | None
    key: bytes | None = None
    headers: Sequence[Header] = field(default_factory=tuple)
    timestamp: int = NO_TIMESTAMP


def _encode_record(out: bytearray, record: NewRecord, offset_delta: int, base_timestamp: int) -> None:
    body = bytearray()
    body.append(0)  # record attributes: unused
    write_varint(body, record.timestamp - base_timestamp)
    write_varint(body, offset_delta)
    write_bytes_field(body, record.key)
    write_bytes_field(body, record.value)
    write_varint(body, len(record.headers))
    for name, value in record.headers:
        write_bytes_field(body, name.encode())
        write_bytes_field(body, value)
    write_varint(out, len(body))
    out += body


def build_batch(
    records: Sequence[NewRecord],
    *,
    base_offset: int = 0,
    compression: int = Compression.NONE,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    transactional: bool = False,
    control: bool = False,
) -> bytes:
    """Encode ``records`` as one v2 batch (CreateTime), compressing the records section if asked."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    timestamps = [r.timestamp for r in records]
    base_timestamp = timestamps[0]  # Kafka's producers use the first record's timestamp as the base
    max_timestamp = max(timestamps)
    body = bytearray()
    for delta, record in enumerate(records):
        _encode_record(body, record, delta, base_timestamp)
    attributes = compression & COMPRESSION_MASK
    if transactional:
        attributes |= TRANSACTIONAL_MASK
    if control:
        attributes |= CONTROL_MASK
    return assemble_batch(
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        attributes=attributes,
        last_offset_delta=len(records) - 1,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        record_count=len(records),
        records=bytes(body),
    )


def assemble_batch(
    *,
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    record_count: int,
    records: bytes,
) -> bytes:
    """A v2 batch around an already encoded (uncompressed) records section, compressed with the
    codec named by ``attributes``; the CRC is computed here."""
    payload = compress(attributes & COMPRESSION_MASK, records) if records else b""
    out = bytearray(
        HEADER_STRUCT.pack(
            base_offset,
            HEADER_SIZE - LOG_OVERHEAD + len(payload),
            partition_leader_epoch,
            MAGIC_V2,
            0,
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            record_count,
        )
    )
    out += payload
    _UINT32.pack_into(out, CRC_POS, crc32c.crc32c(memoryview(out)[ATTRIBUTES_POS:]))
    return bytes(out)
