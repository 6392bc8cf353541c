"""Compression codecs for a batch's records section (gzip, snappy, lz4, zstd), with Kafka's framing quirks.

Pure: no I/O.
"""

from __future__ import annotations

import struct

import cramjam

from ..errors import ErrorCode, KafkaError
from .batch_header import Compression, corrupt

_INT32 = struct.Struct(">i")

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
