"""The fixed 61-byte header of a v2 (magic 2) record batch: parse, validate, and patch fields in place.

This is all the broker's hot path touches: the header and the CRC, never the records themselves.
Pure: no I/O.

On-the-wire layout of one batch (big-endian)::

    0  base offset              int64   \\ "log overhead": not counted by batch length,
    8  batch length             int32   /  not covered by the CRC
    12 partition leader epoch   int32      not covered by the CRC (patched by the leader)
    16 magic                    int8
    17 crc                      uint32     CRC-32C of bytes 21..end
    21 attributes               int16      bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control,
                                           6 delete horizon (base timestamp holds it; set by compaction)
    23 last offset delta        int32
    27 base timestamp           int64
    35 max timestamp            int64
    43 producer id              int64
    51 producer epoch           int16
    53 base sequence            int32
    57 record count             int32
    61 records (possibly compressed)
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum

import crc32c

from ..errors import ErrorCode, KafkaError

MAGIC_V2 = 2
LOG_OVERHEAD = 12  # base offset + batch length: the part of a batch its length field does not count
HEADER_SIZE = 61
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD

BASE_OFFSET_POS = 0
LENGTH_POS = 8
PARTITION_LEADER_EPOCH_POS = 12
MAGIC_POS = 16
CRC_POS = 17
ATTRIBUTES_POS = 21
MAX_TIMESTAMP_POS = 35

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
# KIP-534: the log cleaner stamps batches holding tombstones with the time after which they may be
# removed; the base timestamp then holds that horizon and record timestamps are relative to it.
DELETE_HORIZON_MASK = 0x40

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
INT32_MAX = 2**31 - 1

# The whole fixed header, in wire order; the batch builder packs it too.
HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")
_INT64 = struct.Struct(">q")

Buffer = bytes | bytearray | memoryview


class Compression(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


def corrupt(message: str) -> KafkaError:
    return KafkaError(message, ErrorCode.CORRUPT_MESSAGE)


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The fixed header of one batch, plus where the batch sits in the buffer it was read from."""

    position: int
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes of the whole batch, log overhead included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def end(self) -> int:
        return self.position + self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        return self.base_timestamp if self.attributes & DELETE_HORIZON_MASK else None

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        return sequence_add(self.base_sequence, self.last_offset_delta)


def sequence_add(sequence: int, delta: int) -> int:
    """Producer sequence numbers wrap from int32 max back to 0 (not to int32 min)."""
    if sequence < 0:
        return sequence
    total = sequence + delta
    return total - INT32_MAX - 1 if total > INT32_MAX else total


def read_header(buf: Buffer, offset: int = 0, *, position: int | None = None) -> BatchHeader:
    """Parse the header at ``buf[offset:]``; ``position`` (default ``offset``) is recorded as its location.

    Only checks that 61 bytes are there: call :func:`validate_batch` before trusting the batch.
    """
    if len(buf) - offset < HEADER_SIZE:
        raise corrupt("truncated record batch header")
    return BatchHeader(offset if position is None else position, *HEADER_STRUCT.unpack_from(buf, offset))


def iter_batches(buf: Buffer) -> Iterator[BatchHeader]:
    """Walk the batches of a produce payload; any trailing partial batch is an error.

    Only the framing is checked here (length field sane, batch complete); magic, CRC and
    counts are :func:`validate_batch`'s job.
    """
    pos = 0
    end = len(buf)
    while pos < end:
        if end - pos < LOG_OVERHEAD:
            raise corrupt("trailing bytes after the last record batch")
        (length,) = _INT32.unpack_from(buf, pos + LENGTH_POS)
        if length < MIN_BATCH_LENGTH:
            raise corrupt(f"record batch length {length} is smaller than a batch header")
        if pos + LOG_OVERHEAD + length > end:
            raise corrupt("record batch extends past the end of the data")
        header = read_header(buf, pos)
        yield header
        pos = header.end


# The smallest size an entry of any message format may give (a magic 0 message with no key and no
# value); Kafka refuses smaller ones while walking a message set, before reading the magic.
LEGACY_MIN_RECORD_SIZE = 14


def _entry_end(buf: Buffer, pos: int) -> int | None:
    """Where the message-set entry at ``pos`` ends, read as Kafka's batch iterator reads it, for
    any magic (all three formats keep the length at byte 8 and the magic at byte 16); None when the
    data stops before the entry does, as that iterator then sees no entry there."""
    remaining = len(buf) - pos
    if remaining < LOG_OVERHEAD:
        return None
    (length,) = _INT32.unpack_from(buf, pos + LENGTH_POS)
    if length < LEGACY_MIN_RECORD_SIZE:
        raise corrupt(f"Record size {length} is less than the minimum record overhead ({LEGACY_MIN_RECORD_SIZE})")
    if remaining <= MAGIC_POS:
        return None
    magic = struct.unpack_from(">b", buf, pos + MAGIC_POS)[0]
    if not 0 <= magic <= MAGIC_V2:
        raise corrupt(f"Invalid magic found in record: {magic}")
    if remaining < LOG_OVERHEAD + length:
        return None
    return pos + LOG_OVERHEAD + length


# ZStandard came with Produce v7 (KIP-110): older requests may not use it.
ZSTD_MIN_PRODUCE_VERSION = 7


def check_produce_records(buf: Buffer, version: int = ZSTD_MIN_PRODUCE_VERSION) -> None:
    """What Kafka 4 asks of one partition's records in a Produce request (v3+) before anything
    else looks at them: exactly one batch, of magic 2. Message sets of magic 0 or 1, several
    batches, or no complete batch are INVALID_RECORD; an entry too short or of an unknown magic is
    CORRUPT_MESSAGE; ZStandard in a request older than v7 is UNSUPPORTED_COMPRESSION_TYPE. The
    batch itself (CRC, counts, size) is :func:`validate_batch`'s job."""
    end = _entry_end(buf, 0)
    if end is None:
        raise KafkaError("Produce requests must have at least one record batch per partition",
                         ErrorCode.INVALID_RECORD)
    if buf[MAGIC_POS] != MAGIC_V2:
        raise KafkaError("Produce requests may only contain record batches of magic 2 (message format v2)",
                         ErrorCode.INVALID_RECORD)
    if _entry_end(buf, end) is not None:
        raise KafkaError("Produce requests may only contain one record batch per partition",
                         ErrorCode.INVALID_RECORD)
    if version < ZSTD_MIN_PRODUCE_VERSION and buf[ATTRIBUTES_POS + 1] & COMPRESSION_MASK == Compression.ZSTD:
        raise KafkaError(f"Produce requests with version {version} are not allowed to use ZStandard compression",
                         ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)


def compute_crc(buf: Buffer, header: BatchHeader) -> int:
    """CRC-32C of the batch from the attributes field to its end (the part the CRC covers)."""
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    return crc32c.crc32c(view[header.position + ATTRIBUTES_POS : header.end])


def validate_batch(
    buf: Buffer, header: BatchHeader, *, max_batch_bytes: int | None = None, compacted: bool = False
) -> None:
    """Reject anything the broker must not store, with the error code Kafka uses.

    Order matters for the code a client sees: size first (as Kafka checks it before the CRC),
    then magic and CRC, then the record count / offset delta consistency.

    ``compacted`` is for batches already in a log (recovery, replication): compaction keeps a
    batch's base offset and last offset delta while dropping records, so the count may be lower
    than the offset range, down to zero (an empty batch kept for its producer's sequence numbers).
    """
    if max_batch_bytes is not None and header.size > max_batch_bytes:
        raise KafkaError(
            f"record batch of {header.size} bytes exceeds max.message.bytes {max_batch_bytes}",
            ErrorCode.MESSAGE_TOO_LARGE,
        )
    if header.magic != MAGIC_V2:
        raise corrupt(f"unsupported record batch magic {header.magic} (only v2 is supported)")
    if header.batch_length < MIN_BATCH_LENGTH or header.end > len(buf):
        raise corrupt("record batch length is inconsistent with the data")
    if compute_crc(buf, header) != header.crc:
        raise corrupt("record batch CRC mismatch")
    if compacted:
        if header.record_count < 0 or header.record_count > header.last_offset_delta + 1:
            raise KafkaError(
                f"record count {header.record_count} does not fit last offset delta {header.last_offset_delta}",
                ErrorCode.INVALID_RECORD,
            )
    elif header.record_count < 1:
        raise KafkaError("record batch has no records", ErrorCode.INVALID_RECORD)
    elif header.last_offset_delta != header.record_count - 1:
        raise KafkaError(
            f"last offset delta {header.last_offset_delta} does not match record count {header.record_count}",
            ErrorCode.INVALID_RECORD,
        )
    if header.compression > Compression.ZSTD:
        raise KafkaError(f"unknown compression codec {header.compression}", ErrorCode.CORRUPT_MESSAGE)


def patch_offset_and_epoch(buf: bytearray | memoryview, header: BatchHeader, base_offset: int, epoch: int) -> None:
    """Assign the batch's offsets and leader epoch; both fields sit outside the CRC, so no recompute."""
    _INT64.pack_into(buf, header.position + BASE_OFFSET_POS, base_offset)
    _INT32.pack_into(buf, header.position + PARTITION_LEADER_EPOCH_POS, epoch)


def set_log_append_time(buf: bytearray | memoryview, header: BatchHeader, timestamp: int) -> int:
    """Mark the batch LogAppendTime with max timestamp = ``timestamp``; returns the new CRC.

    Consumers then take every record's timestamp from the max timestamp, which is why the
    records themselves are untouched (no re-encoding, no decompression). The attributes and max
    timestamp are inside the CRC region, so the CRC is recomputed.
    """
    attributes = header.attributes | TIMESTAMP_TYPE_MASK
    _INT16.pack_into(buf, header.position + ATTRIBUTES_POS, attributes)
    _INT64.pack_into(buf, header.position + MAX_TIMESTAMP_POS, timestamp)
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    crc = crc32c.crc32c(view[header.position + ATTRIBUTES_POS : header.end])
    _UINT32.pack_into(buf, header.position + CRC_POS, crc)
    return crc
