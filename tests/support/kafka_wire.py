"""Two Kafka requests sent by hand to one chosen node: Metadata v12 and DescribeQuorum v0.

The cluster harness polls cluster state while nodes die, freeze and vanish from the network.
For that it does not use a client library: the Python clients pick the node themselves (a frozen
or cut-off one makes them wait out their timeouts), and while the harness polled through
librdkafka 2.16.1's Admin API, 3 of 6 fault-injection runs died: an assertion in its
admin-request code (``rd_kafka_enq_once_del_source_return: Assertion 'eonce->refcnt > 0'``)
and segfaults. A blocking socket with a timeout, one request, one answer, is all a poll needs.
"""

from __future__ import annotations

import itertools
import socket
import struct
from dataclasses import dataclass

METADATA = 3
DESCRIBE_QUORUM = 55
CLIENT_ID = b"process-cluster"
_correlation = itertools.count(1)


class WireError(RuntimeError):
    """The node answered with an error code or something unexpected."""


@dataclass(frozen=True)
class PartitionState:
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True)
class ClusterView:
    """One node's metadata: the live (unfenced) brokers and every partition's state."""

    brokers: frozenset[int]
    controller_id: int
    partitions: dict[tuple[str, int], PartitionState]
    # Topics the node answered with an error for (name -> error code).
    topic_errors: dict[str, int]


@dataclass(frozen=True)
class QuorumState:
    leader_id: int
    leader_epoch: int
    high_watermark: int
    # voter id -> its log end offset as the leader last saw it (-1 unknown)
    voters: dict[int, int]


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _unpack(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(value)

    def int8(self) -> int:
        return self._unpack(">b")

    def int16(self) -> int:
        return self._unpack(">h")

    def int32(self) -> int:
        return self._unpack(">i")

    def int64(self) -> int:
        return self._unpack(">q")

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def count(self) -> int:
        """A compact array's length (-1 for null)."""
        return self.uvarint() - 1

    def compact_string(self) -> str | None:
        length = self.uvarint() - 1
        if length < 0:
            return None
        text = self.data[self.pos:self.pos + length].decode()
        self.pos += length
        return text

    def skip(self, n: int) -> None:
        self.pos += n

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.pos += self.uvarint()  # size, then the value

    def int32_array(self) -> tuple[int, ...]:
        return tuple(self.int32() for _ in range(max(self.count(), 0)))


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            raise ConnectionError("connection closed by the server")
        chunks += chunk
    return bytes(chunks)


def _flexible_request(host: str, port: int, api_key: int, version: int, body: bytes, timeout: float) -> _Reader:
    """Send one request (header v2) and return a reader past the response header (v1)."""
    correlation_id = next(_correlation) & 0x7FFFFFFF
    header = struct.pack(">hhih", api_key, version, correlation_id, len(CLIENT_ID)) + CLIENT_ID + b"\x00"
    frame = header + body
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        (size,) = struct.unpack(">i", _recv_exact(sock, 4))
        reader = _Reader(_recv_exact(sock, size))
    if reader.int32() != correlation_id:
        raise WireError(f"api {api_key}: correlation id mismatch")
    reader.skip_tags()
    return reader


def metadata(host: str, port: int, timeout: float = 5.0) -> ClusterView:
    """Metadata v12 for every topic, as this node sees it."""
    # topics: null (every topic), allow_auto_topic_creation, include_topic_authorized_operations, tags
    reader = _flexible_request(host, port, METADATA, 12, b"\x00\x00\x00\x00", timeout)
    reader.int32()  # throttle time
    brokers = set()
    for _ in range(reader.count()):
        brokers.add(reader.int32())
        reader.compact_string()  # host
        reader.int32()  # port
        reader.compact_string()  # rack
        reader.skip_tags()
    reader.compact_string()  # cluster id
    controller_id = reader.int32()
    partitions: dict[tuple[str, int], PartitionState] = {}
    errors: dict[str, int] = {}
    for _ in range(reader.count()):
        topic_error = reader.int16()
        name = reader.compact_string() or ""
        reader.skip(16)  # topic id
        reader.int8()  # is internal
        if topic_error:
            errors[name] = topic_error
        for _ in range(max(reader.count(), 0)):
            reader.int16()  # partition error (LEADER_NOT_AVAILABLE shows as leader -1 too)
            index, leader = reader.int32(), reader.int32()
            reader.int32()  # leader epoch
            replicas, isr = reader.int32_array(), reader.int32_array()
            reader.int32_array()  # offline replicas
            reader.skip_tags()
            partitions[(name, index)] = PartitionState(leader, replicas, isr)
        reader.int32()  # topic authorized operations
        reader.skip_tags()
    return ClusterView(frozenset(brokers), controller_id, partitions, errors)


def describe_quorum(host: str, port: int, timeout: float = 5.0) -> QuorumState:
    """DescribeQuorum v0 for ``__cluster_metadata``; a broker forwards it to the active controller."""
    name = b"__cluster_metadata"
    # topics [name, partitions [index, tags], tags], tags; compact lengths are n + 1.
    body = b"\x02" + bytes([len(name) + 1]) + name + b"\x02" + struct.pack(">i", 0) + b"\x00\x00\x00"
    reader = _flexible_request(host, port, DESCRIBE_QUORUM, 0, body, timeout)
    if error := reader.int16():
        raise WireError(f"DescribeQuorum error code {error}")
    for _ in range(reader.count()):
        reader.compact_string()
        for _ in range(reader.count()):
            reader.int32()  # partition index
            if error := reader.int16():
                raise WireError(f"DescribeQuorum partition error code {error}")
            leader_id, leader_epoch, high_watermark = reader.int32(), reader.int32(), reader.int64()
            voters = {}
            for _ in range(reader.count()):
                replica_id, log_end = reader.int32(), reader.int64()
                reader.skip_tags()
                voters[replica_id] = log_end
            return QuorumState(leader_id, leader_epoch, high_watermark, voters)
    raise WireError("DescribeQuorum: no __cluster_metadata partition in the response")
