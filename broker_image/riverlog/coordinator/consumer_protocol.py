"""Reading the topics a consumer subscribes to out of its JoinGroup metadata.

For protocol type ``consumer`` the member metadata is a ``ConsumerProtocolSubscription``:
an int16 version, then (in every version, as the v0 prefix) an array of topic names. The
coordinator needs only that list: OffsetDelete refuses to delete offsets of a topic the group
still consumes, and offsets of subscribed topics do not expire while the group is Stable.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..protocol.primitives import DecodeError, Reader

CONSUMER_PROTOCOL_TYPE = "consumer"


def subscribed_topics(metadata: bytes) -> set[str]:
    """Topics of one subscription; raises DecodeError when the bytes are not one."""
    r = Reader(metadata)
    version = r.int16()
    if version < 0:
        raise DecodeError(f"negative consumer protocol version {version}")
    count = r.int32()
    if count < 0 or count > r.remaining():
        raise DecodeError(f"bad topic count {count}")
    topics: set[str] = set()
    for _ in range(count):
        length = r.int16()
        if length < 0:
            raise DecodeError("null topic name in subscription")
        topics.add(r.string(length))
    return topics


def union_of_subscriptions(metadatas: Iterable[bytes]) -> set[str] | None:
    """All topics the members subscribe to, or None if any subscription is unreadable (the
    coordinator then treats every topic as possibly subscribed, as Kafka does)."""
    topics: set[str] = set()
    try:
        for metadata in metadatas:
            topics |= subscribed_topics(metadata)
    except DecodeError:
        return None
    return topics
