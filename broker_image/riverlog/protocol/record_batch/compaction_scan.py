"""Locating records in a batch without decoding them: what the log cleaner needs for compaction.

Compaction decides per record from its offset, timestamp, key and whether it has a value, then
copies the kept records' bytes as they are. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from .batch_header import HEADER_SIZE, BatchHeader, Buffer, corrupt
from .compression import decompress
from .record_fields import read_bytes_field, read_varint, write_varint


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
        key, pos = read_bytes_field(payload, pos)
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
