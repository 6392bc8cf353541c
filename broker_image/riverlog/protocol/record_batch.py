"""Kafka record batch v2 (magic 2): header parsing, validation, in-place patching, build and decode.

Pure: no I/O. The broker's hot path only touches the 61-byte batch header and the CRC; building and
decoding records (with compression) exist for the CLI and tests.

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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

import cramjam
import crc32c

from riverlog.protocol.errors import ErrorCode, KafkaError

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

_HEADER = struct.Struct(">qiibIhiqqqhii")
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
    return BatchHeader(offset if position is None else position, *_HEADER.unpack_from(buf, offset))


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


# --- varints (zigzag) -----------------------------------------------------------------------------


def write_varint(out: bytearray, value: int) -> None:
    """Zigzag varint as used by the record format for both int32 and int64 fields."""
    encoded = (value << 1) ^ (value >> 63)
    encoded &= (1 << 64) - 1
    while encoded >= 0x80:
        out.append((encoded & 0x7F) | 0x80)
        encoded >>= 7
    out.append(encoded)


def read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Decode a zigzag varint at ``pos``; returns (value, position after it)."""
    result = 0
    shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise corrupt("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift > 63:
            raise corrupt("varint is too long")
    return (result >> 1) ^ -(result & 1), pos


# --- compression ----------------------------------------------------------------------------------

# snappy-java's stream format (what the Java client writes): magic, version, compatible version,
# then blocks each prefixed by their compressed length.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024


def _snappy_compress(data: bytes) -> bytes:
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, max(len(data), 1), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK]))
        out += _INT32.pack(len(block))
        out += block
    return bytes(out)


def _snappy_decompress(data: bytes) -> bytes:
    # librdkafka may send raw snappy; the Java client sends xerial-framed blocks. Accept both.
    if not data.startswith(XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    pos = len(_XERIAL_HEADER)
    parts: list[bytes] = []
    while pos < len(data):
        if pos + 4 > len(data):
            raise corrupt("truncated xerial snappy block length")
        (length,) = _INT32.unpack_from(data, pos)
        pos += 4
        if length < 0 or pos + length > len(data):
            raise corrupt("truncated xerial snappy block")
        parts.append(bytes(cramjam.snappy.decompress_raw(data[pos : pos + length])))
        pos += length
    return b"".join(parts)


def _lz4_compress(data: bytes) -> bytes:
    # Kafka's Java reader decompresses each LZ4 frame block on its own, so blocks must be
    # independent (cramjam's one-shot compress links them).
    compressor = cramjam.lz4.Compressor(block_linked=False, content_checksum=False)
    compressor.compress(data)
    return bytes(compressor.finish())


def compress(codec: int, data: bytes) -> bytes:
    if codec == Compression.NONE:
        return data
    if codec == Compression.GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == Compression.SNAPPY:
        return _snappy_compress(data)
    if codec == Compression.LZ4:
        return _lz4_compress(data)
    if codec == Compression.ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise KafkaError(f"unknown compression codec {codec}", ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)


def decompress(codec: int, data: bytes) -> bytes:
    try:
        if codec == Compression.NONE:
            return data
        if codec == Compression.GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == Compression.SNAPPY:
            return _snappy_decompress(data)
        if codec == Compression.LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == Compression.ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as exc:
        raise corrupt(f"cannot decompress record batch: {exc}") from exc
    raise KafkaError(f"unknown compression codec {codec}", ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)


# --- building -------------------------------------------------------------------------------------

Header = tuple[str, bytes | None]


@dataclass(frozen=True, slots=True)
class NewRecord:
    """A record to put into a batch (producer side)."""

    value: bytes | None
    key: bytes | None = None
    headers: Sequence[Header] = field(default_factory=tuple)
    timestamp: int = NO_TIMESTAMP


def _encode_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        write_varint(out, -1)
    else:
        write_varint(out, len(value))
        out += value


def _encode_record(out: bytearray, record: NewRecord, offset_delta: int, base_timestamp: int) -> None:
    body = bytearray()
    body.append(0)  # record attributes: unused
    write_varint(body, record.timestamp - base_timestamp)
    write_varint(body, offset_delta)
    _encode_bytes(body, record.key)
    _encode_bytes(body, record.value)
    write_varint(body, len(record.headers))
    for name, value in record.headers:
        _encode_bytes(body, name.encode())
        _encode_bytes(body, value)
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
        _HEADER.pack(
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


# --- decoding -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Record:
    """A decoded record (consumer side)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]


def _decode_bytes(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    length, pos = read_varint(buf, pos)
    if length < 0:
        return None, pos
    if pos + length > len(buf):
        raise corrupt("record field extends past the batch")
    return buf[pos : pos + length], pos + length


def decode_records(buf: Buffer, header: BatchHeader | None = None) -> list[Record]:
    """Decode (decompressing if needed) the records of the batch at ``header`` (default: the first)."""
    if header is None:
        header = read_header(buf, 0)
    if header.end > len(buf):
        raise corrupt("record batch extends past the end of the data")
    payload = decompress(header.compression, bytes(buf[header.position + HEADER_SIZE : header.end]))
    log_append_time = header.is_log_append_time
    records: list[Record] = []
    pos = 0
    for _ in range(header.record_count):
        length, pos = read_varint(payload, pos)
        end = pos + length
        if length < 0 or end > len(payload):
            raise corrupt("record extends past the batch")
        pos += 1  # record attributes
        timestamp_delta, pos = read_varint(payload, pos)
        offset_delta, pos = read_varint(payload, pos)
        key, pos = _decode_bytes(payload, pos)
        value, pos = _decode_bytes(payload, pos)
        header_count, pos = read_varint(payload, pos)
        headers: list[Header] = []
        for _ in range(header_count):
            name, pos = _decode_bytes(payload, pos)
            header_value, pos = _decode_bytes(payload, pos)
            headers.append(((name or b"").decode(), header_value))
        if pos != end:
            raise corrupt("record length does not match its fields")
        # With LogAppendTime every record carries the broker's time, stored once as the max timestamp.
        timestamp = header.max_timestamp if log_append_time else header.base_timestamp + timestamp_delta
        records.append(Record(header.base_offset + offset_delta, timestamp, key, value, tuple(headers)))
    return records


def iter_records(buf: Buffer) -> Iterator[tuple[BatchHeader, Record]]:
    """Decode every complete batch in ``buf``; a partial last batch (fetch responses may end
    mid-batch) is skipped, as Kafka consumers do."""
    pos = 0
    while len(buf) - pos >= HEADER_SIZE:
        header = read_header(buf, pos)
        if header.batch_length < MIN_BATCH_LENGTH:
            raise corrupt("record batch length is smaller than a batch header")
        if header.end > len(buf):
            return
        for record in decode_records(buf, header):
            yield header, record
        pos = header.end


# --- locating records without decoding them (log compaction) --------------------------------------


@dataclass(frozen=True, slots=True)
class RawRecord:
    """Where one record sits in a decompressed records section, with what compaction decides on.

    Compaction copies the bytes of the records it keeps (``payload[start:end]``) instead of
    re-encoding them, so nothing it does not understand (header names, attributes) can change.
    """

    offset: int
    timestamp: int
    key: bytes | None
    has_value: bool
    start: int  # the record's length varint
    end: int
    timestamp_end: int  # just after the timestamp delta: the offset delta and the rest follow


def records_section(buf: Buffer, header: BatchHeader) -> bytes:
    """The batch's records section, decompressed."""
    if header.end > len(buf):
        raise corrupt("record batch extends past the end of the data")
    return decompress(header.compression, bytes(buf[header.position + HEADER_SIZE : header.end]))


def scan_records(payload: bytes, header: BatchHeader) -> list[RawRecord]:
    """Locate the ``header.record_count`` records of ``payload`` (from :func:`records_section`)."""
    out: list[RawRecord] = []
    pos = 0
    log_append_time = header.is_log_append_time
    for _ in range(header.record_count):
        start = pos
        length, pos = read_varint(payload, pos)
        end = pos + length
        if length < 0 or end > len(payload):
            raise corrupt("record extends past the batch")
        pos += 1  # record attributes
        timestamp_delta, pos = read_varint(payload, pos)
        timestamp_end = pos
        offset_delta, pos = read_varint(payload, pos)
        key, pos = _decode_bytes(payload, pos)
        value_length, pos = read_varint(payload, pos)
        if pos > end:
            raise corrupt("record length does not match its fields")
        timestamp = header.max_timestamp if log_append_time else header.base_timestamp + timestamp_delta
        out.append(RawRecord(header.base_offset + offset_delta, timestamp, key, value_length >= 0, start, end,
                             timestamp_end))
        pos = end
    return out


def copy_record(payload: bytes, record: RawRecord, base_timestamp: int | None = None) -> bytes:
    """The record's bytes, with its timestamp delta recomputed against ``base_timestamp`` if given
    (a batch whose base timestamp changes, as when it gets a delete horizon)."""
    if base_timestamp is None:
        return payload[record.start : record.end]
    _, pos = read_varint(payload, record.start)
    out = bytearray()
    out.append(payload[pos])  # record attributes
    write_varint(out, record.timestamp - base_timestamp)
    out += payload[record.timestamp_end : record.end]
    framed = bytearray()
    write_varint(framed, len(out))
    framed += out
    return bytes(framed)
