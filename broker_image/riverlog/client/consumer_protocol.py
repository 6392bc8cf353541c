"""The embedded "consumer" protocol: subscriptions and assignments inside group messages.

Classic groups treat a member's metadata (JoinGroup) and assignment (SyncGroup) as opaque bytes;
consumers fill them with Kafka's ConsumerProtocolSubscription and ConsumerProtocolAssignment
structures (non-flexible, versioned by a leading int16). Tools decode them to show which
partitions each member owns, as ``kafka-consumer-groups.sh --describe`` does.

Decoders read the fields of the versions they know and ignore trailing bytes, which is how Kafka
stays compatible with newer versions of these structures.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..protocol.primitives import DecodeError, Reader

PROTOCOL_TYPE = "consumer"


@dataclass(frozen=True, slots=True)
class Subscription:
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: dict[str, tuple[int, ...]] = field(default_factory=dict)
    generation_id: int = -1
    rack_id: str | None = None
    version: int = 0


@dataclass(frozen=True, slots=True)
class Assignment:
    partitions: dict[str, tuple[int, ...]]
    user_data: bytes | None = None
    version: int = 0

    def topic_partitions(self) -> list[tuple[str, int]]:
        """``[(topic, partition), ...]`` sorted by topic, then partition."""
        return sorted((t, p) for t, ps in self.partitions.items() for p in ps)


# --- encoding -------------------------------------------------------------------------------------


def _string(out: bytearray, value: str | None) -> None:
    if value is None:
        out += struct.pack(">h", -1)
        return
    data = value.encode()
    out += struct.pack(">h", len(data)) + data


def _bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        out += struct.pack(">i", -1)
        return
    out += struct.pack(">i", len(value)) + value


def _topic_partitions(out: bytearray, partitions: Mapping[str, Sequence[int]]) -> None:
    out += struct.pack(">i", len(partitions))
    for topic, ps in partitions.items():
        _string(out, topic)
        out += struct.pack(">i", len(ps))
        for p in ps:
            out += struct.pack(">i", p)


def encode_subscription(
    topics: Sequence[str],
    *,
    user_data: bytes | None = None,
    owned_partitions: Mapping[str, Sequence[int]] | None = None,
    generation_id: int = -1,
    rack_id: str | None = None,
    version: int = 0,
) -> bytes:
    """ConsumerProtocolSubscription in ``version`` (0-3)."""
    if not 0 <= version <= 3:
        raise ValueError(f"unsupported subscription version {version}")
    out = bytearray(struct.pack(">h", version))
    out += struct.pack(">i", len(topics))
    for t in topics:
        _string(out, t)
    _bytes(out, user_data)
    if version >= 1:
        _topic_partitions(out, owned_partitions or {})
    if version >= 2:
        out += struct.pack(">i", generation_id)
    if version >= 3:
        _string(out, rack_id)
    return bytes(out)


def encode_assignment(
    partitions: Mapping[str, Sequence[int]], *, user_data: bytes | None = None, version: int = 0
) -> bytes:
    """ConsumerProtocolAssignment (versions 0-3 share one layout)."""
    out = bytearray(struct.pack(">h", version))
    _topic_partitions(out, partitions)
    _bytes(out, user_data)
    return bytes(out)


# --- decoding -------------------------------------------------------------------------------------


def _read_string(r: Reader) -> str | None:
    n = r.int16()
    if n < 0:
        return None
    return bytes(r.raw(n)).decode()


def _read_bytes(r: Reader) -> bytes | None:
    n = r.int32()
    if n < 0:
        return None
    return bytes(r.raw(n))


def _read_count(r: Reader, min_item_size: int) -> int:
    n = r.int32()
    # A count that cannot fit in what is left is garbage: refuse it before allocating anything.
    if n < 0 or n * min_item_size > r.remaining():
        raise DecodeError(f"implausible array length {n}")
    return n


def _read_topic_partitions(r: Reader) -> dict[str, tuple[int, ...]]:
    out: dict[str, tuple[int, ...]] = {}
    for _ in range(_read_count(r, 6)):
        topic = _read_string(r)
        if topic is None:
            raise DecodeError("null topic name")
        parts = tuple(r.int32() for _ in range(_read_count(r, 4)))
        out[topic] = out.get(topic, ()) + parts
    return out


def decode_subscription(data: bytes) -> Subscription:
    """Raises :class:`DecodeError` (a ValueError) when ``data`` is not a subscription."""
    r = Reader(data)
    version = r.int16()
    if version < 0:
        raise DecodeError(f"negative subscription version {version}")
    topics: list[str] = []
    for _ in range(_read_count(r, 2)):
        t = _read_string(r)
        if t is None:
            raise DecodeError("null topic name")
        topics.append(t)
    user_data = _read_bytes(r)
    owned: dict[str, tuple[int, ...]] = {}
    generation_id = -1
    rack_id = None
    if version >= 1:
        owned = _read_topic_partitions(r)
    if version >= 2:
        generation_id = r.int32()
    if version >= 3:
        rack_id = _read_string(r)
    return Subscription(tuple(topics), user_data, owned, generation_id, rack_id, version)


def decode_assignment(data: bytes) -> Assignment:
    """Raises :class:`DecodeError` (a ValueError) when ``data`` is not an assignment.

    An empty byte string is a valid "nothing assigned" (what a member gets while the group has
    not completed a rebalance).
    """
    if not data:
        return Assignment({})
    r = Reader(data)
    version = r.int16()
    if version < 0:
        raise DecodeError(f"negative assignment version {version}")
    partitions = _read_topic_partitions(r)
    user_data = _read_bytes(r) if r.remaining() >= 4 else None
    return Assignment(partitions, user_data, version)
