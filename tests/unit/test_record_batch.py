"""Record batch v2: build, parse, validate, patch and decode, for every codec."""

from __future__ import annotations

import struct

import cramjam
import crc32c
import pytest
from riverlog.protocol.errors import ErrorCode, KafkaError
from riverlog.protocol.record_batch import (
    ATTRIBUTES_POS,
    CRC_POS,
    HEADER_SIZE,
    INT32_MAX,
    LENGTH_POS,
    LOG_OVERHEAD,
    MAGIC_POS,
    XERIAL_MAGIC,
    Compression,
    NewRecord,
    build_batch,
    compute_crc,
    decode_records,
    iter_batches,
    iter_records,
    patch_offset_and_epoch,
    read_header,
    read_varint,
    sequence_add,
    set_log_append_time,
    validate_batch,
    write_varint,
)

pytestmark = pytest.mark.unit

RECORDS = [
    NewRecord(b"value-0" * 50, b"key-0", [("h1", b"x"), ("h2", None)], 1_700_000_000_000),
    NewRecord(None, None, (), 1_700_000_000_005),  # a tombstone with no key
    NewRecord(b"", b"", [("empty", b"")], 1_699_999_999_990),  # timestamps need not grow
    NewRecord("ünïcode".encode(), None, [("ключ", "значение".encode())], 1_700_000_000_001),
]


def repack(batch: bytes, payload: bytes, codec: int) -> bytes:
    """The same batch header with another records section (recomputing length and CRC)."""
    out = bytearray(batch[:HEADER_SIZE] + payload)
    struct.pack_into(">i", out, LENGTH_POS, len(out) - LOG_OVERHEAD)
    attributes = (struct.unpack_from(">h", out, ATTRIBUTES_POS)[0] & ~0x07) | codec
    struct.pack_into(">h", out, ATTRIBUTES_POS, attributes)
    struct.pack_into(">I", out, CRC_POS, crc32c.crc32c(bytes(out[ATTRIBUTES_POS:])))
    return bytes(out)


@pytest.mark.parametrize("codec", list(Compression))
def test_round_trip_every_codec(codec: Compression) -> None:
    data = build_batch(RECORDS, base_offset=7, compression=codec, producer_id=42, producer_epoch=3, base_sequence=10)
    header = read_header(data)
    validate_batch(data, header)
    assert header.compression == codec
    assert header.size == len(data)
    assert (header.base_offset, header.last_offset, header.record_count) == (7, 10, 4)
    assert (header.producer_id, header.producer_epoch, header.base_sequence, header.last_sequence) == (42, 3, 10, 13)
    assert header.base_timestamp == RECORDS[0].timestamp
    assert header.max_timestamp == max(r.timestamp for r in RECORDS)
    assert not header.is_log_append_time and not header.is_control and not header.is_transactional

    decoded = decode_records(data)
    assert [r.offset for r in decoded] == [7, 8, 9, 10]
    for new, got in zip(RECORDS, decoded, strict=True):
        assert (got.key, got.value, got.timestamp, list(got.headers)) == (
            new.key,
            new.value,
            new.timestamp,
            list(new.headers),
        )


def test_compression_shrinks_repetitive_data() -> None:
    plain = build_batch(RECORDS, compression=Compression.NONE)
    for codec in (Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD):
        assert len(build_batch(RECORDS, compression=codec)) < len(plain)


def test_snappy_writes_xerial_and_reads_raw_too() -> None:
    xerial = build_batch(RECORDS, compression=Compression.SNAPPY)
    assert xerial[HEADER_SIZE:].startswith(XERIAL_MAGIC)
    plain = build_batch(RECORDS)
    raw = repack(plain, bytes(cramjam.snappy.compress_raw(plain[HEADER_SIZE:])), Compression.SNAPPY)
    validate_batch(raw, read_header(raw))
    assert decode_records(raw) == decode_records(xerial) == decode_records(plain)


def test_xerial_snappy_with_several_blocks() -> None:
    big = [NewRecord(bytes(range(256)) * 300, None, (), 5)]  # > one 32 KiB xerial block
    data = build_batch(big, compression=Compression.SNAPPY)
    assert decode_records(data)[0].value == big[0].value


def test_lz4_frames_use_independent_blocks() -> None:
    # Kafka's Java reader decompresses every LZ4 block on its own.
    data = build_batch([NewRecord(b"a" * 200_000, None, (), 1)], compression=Compression.LZ4)
    frame = data[HEADER_SIZE:]
    assert frame[:4] == b"\x04\x22\x4d\x18"
    assert frame[4] & 0x20, "block independence flag"
    assert decode_records(data)[0].value == b"a" * 200_000


def test_gzip_and_zstd_streams_from_other_writers_decode() -> None:
    plain = build_batch(RECORDS)
    body = plain[HEADER_SIZE:]
    compressor = cramjam.zstd.Compressor()  # streaming frame: no content size in the header
    compressor.compress(body)
    zstd_stream = repack(plain, bytes(compressor.finish()), Compression.ZSTD)
    gzip_other = repack(plain, bytes(cramjam.gzip.compress(body, level=1)), Compression.GZIP)
    assert decode_records(zstd_stream) == decode_records(plain)
    assert decode_records(gzip_other) == decode_records(plain)


def test_corrupt_compressed_payload_is_corrupt_message() -> None:
    plain = build_batch(RECORDS)
    broken = repack(plain, b"not gzip at all", Compression.GZIP)
    with pytest.raises(KafkaError) as err:
        decode_records(broken)
    assert err.value.code == ErrorCode.CORRUPT_MESSAGE


def test_crc_corruption_is_detected() -> None:
    data = bytearray(build_batch(RECORDS))
    data[-5] ^= 0x01
    with pytest.raises(KafkaError) as err:
        validate_batch(data, read_header(data))
    assert err.value.code == ErrorCode.CORRUPT_MESSAGE


def test_crc_covers_attributes_but_not_offset_or_epoch() -> None:
    data = bytearray(build_batch(RECORDS))
    header = read_header(data)
    patch_offset_and_epoch(data, header, 123_456_789_012, 17)
    patched = read_header(data)
    validate_batch(data, patched)
    assert (patched.base_offset, patched.partition_leader_epoch) == (123_456_789_012, 17)
    assert [r.offset for r in decode_records(data)] == [123_456_789_012 + i for i in range(4)]
    data[ATTRIBUTES_POS + 1] ^= 0x10  # flip the transactional bit: inside the CRC
    with pytest.raises(KafkaError):
        validate_batch(data, read_header(data))


def test_log_append_time_rewrites_timestamps_and_keeps_crc_valid() -> None:
    data = bytearray(build_batch(RECORDS, compression=Compression.LZ4))
    header = read_header(data)
    crc = set_log_append_time(data, header, 1_800_000_000_000)
    stamped = read_header(data)
    validate_batch(data, stamped)
    assert stamped.crc == crc == compute_crc(data, stamped)
    assert stamped.is_log_append_time
    assert stamped.max_timestamp == 1_800_000_000_000
    assert stamped.compression == Compression.LZ4
    assert {r.timestamp for r in decode_records(data)} == {1_800_000_000_000}


def test_validation_error_codes() -> None:
    good = build_batch(RECORDS)
    with pytest.raises(KafkaError) as err:
        validate_batch(good, read_header(good), max_batch_bytes=len(good) - 1)
    assert err.value.code == ErrorCode.MESSAGE_TOO_LARGE
    validate_batch(good, read_header(good), max_batch_bytes=len(good))

    old_magic = bytearray(good)
    old_magic[MAGIC_POS] = 1
    with pytest.raises(KafkaError) as err:
        validate_batch(old_magic, read_header(old_magic))
    assert err.value.code == ErrorCode.CORRUPT_MESSAGE

    # A record count that disagrees with the last offset delta (CRC fixed up so only that is wrong).
    miscounted = bytearray(good)
    struct.pack_into(">i", miscounted, 57, 3)
    struct.pack_into(">I", miscounted, CRC_POS, crc32c.crc32c(bytes(miscounted[ATTRIBUTES_POS:])))
    with pytest.raises(KafkaError) as err:
        validate_batch(miscounted, read_header(miscounted))
    assert err.value.code == ErrorCode.INVALID_RECORD


def test_iter_batches_walks_several_and_rejects_partial_tail() -> None:
    a = build_batch(RECORDS[:2])
    b = build_batch(RECORDS[2:], compression=Compression.ZSTD)
    headers = list(iter_batches(a + b))
    assert [(h.position, h.size) for h in headers] == [(0, len(a)), (len(a), len(b))]
    for cut in (len(a) + 5, len(a) + HEADER_SIZE + 1, len(a) + len(b) - 1):
        with pytest.raises(KafkaError) as err:
            list(iter_batches((a + b)[:cut]))
        assert err.value.code == ErrorCode.CORRUPT_MESSAGE
    assert list(iter_batches(b"")) == []


def test_iter_records_skips_a_partial_last_batch() -> None:
    a = build_batch(RECORDS[:2], base_offset=0)
    b = build_batch(RECORDS[2:], base_offset=2)
    offsets = [r.offset for _h, r in iter_records(a + b[:-3])]
    assert offsets == [0, 1]
    assert [r.offset for _h, r in iter_records(a + b)] == [0, 1, 2, 3]


@pytest.mark.parametrize("value", [0, 1, -1, 63, -64, 64, 300, -300, 2**31 - 1, -(2**31), 2**62, -(2**63)])
def test_zigzag_varint_round_trip(value: int) -> None:
    out = bytearray()
    write_varint(out, value)
    assert read_varint(bytes(out), 0) == (value, len(out))


def test_zigzag_encoding_matches_the_spec() -> None:
    encoded = []
    for value in (0, -1, 1, -2, 150):
        out = bytearray()
        write_varint(out, value)
        encoded.append(bytes(out))
    assert encoded == [b"\x00", b"\x01", b"\x02", b"\x03", b"\xac\x02"]


def test_sequences_wrap_at_int32_max() -> None:
    assert sequence_add(INT32_MAX - 1, 1) == INT32_MAX
    assert sequence_add(INT32_MAX, 1) == 0
    assert sequence_add(INT32_MAX - 2, 5) == 2
    data = build_batch(RECORDS, producer_id=1, producer_epoch=0, base_sequence=INT32_MAX - 1)
    assert read_header(data).last_sequence == 1  # MAX-1, MAX, 0, 1


def test_build_needs_records() -> None:
    with pytest.raises(ValueError):
        build_batch([])
