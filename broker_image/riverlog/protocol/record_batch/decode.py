"""Decoding the records of v2 batches into :class:`Record` values (consumer side: the CLI, tools, tests).

The broker itself never needs this: it stores and serves batches as they came. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from .batch_header import HEADER_SIZE, MIN_BATCH_LENGTH, BatchHeader, Buffer, corrupt, read_header
from .compression import decompress
from .record_fields import Header, read_bytes_field, read_varint


@dataclass(frozen=True, slots=True)
class Record:
    """A decoded record (consumer side)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]


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
        key, pos = read_bytes_field(payload, pos)
        value, pos = read_bytes_field(payload, pos)
        header_count, pos = read_varint(payload, pos)
        headers: list[Header] = []
        for _ in range(header_count):
            name, pos = read_bytes_field(payload, pos)
            header_value, pos = read_bytes_field(payload, pos)
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
