"""How the fields inside one record are encoded: zigzag varints and varint-length-prefixed bytes.

Shared by building, decoding and the compaction scan. Pure: no I/O.
"""

from __future__ import annotations

from .batch_header import Buffer, corrupt

# A record header: a (name, value) pair; the value may be null.
Header = tuple[str, bytes | None]


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


def write_bytes_field(out: bytearray, value: bytes | None) -> None:
    """A varint length then the bytes; null is length -1 with nothing after it."""
    if value is None:
        write_varint(out, -1)
    else:
        write_varint(out, len(value))
        out += value


def read_bytes_field(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    """The field :func:`write_bytes_field` writes, at ``pos``; returns (value, position after it)."""
    length, pos = read_varint(buf, pos)
    if length < 0:
        return None, pos
    if pos + length > len(buf):
        raise corrupt("record field extends past the batch")
    return buf[pos : pos + length], pos + length
