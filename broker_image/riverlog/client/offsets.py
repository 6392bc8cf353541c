"""ListOffsets routed to partition leaders, shared by the admin client and the consumer."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass

from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode
from .cluster import Cluster
from .errors import BrokerError
from .retry import Final, with_retries

# Special ListOffsets timestamps.
EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3


@dataclass(frozen=True, slots=True)
class OffsetInfo:
    """A ListOffsets answer for one partition."""

    partition: int
    offset: int  # -1 when no record matches (a timestamp after the last record)
    timestamp: int
    leader_epoch: int = -1


async def list_offsets(
    cluster: Cluster, topic: str, timestamps: Mapping[int, int], *, timeout: float = 30.0
) -> dict[int, OffsetInfo]:
    """The offset for each ``{partition: timestamp}``, each asked of its partition's leader.

    Timestamps: EARLIEST (-2), LATEST (-1), MAX_TIMESTAMP (-3), or a time in ms (the first offset
    whose timestamp is at least that). Leader moves are retried; an unknown topic or partition
    in fresh metadata is final.
    """
    remaining = dict(timestamps)
    out: dict[int, OffsetInfo] = {}

    async def attempt() -> None:
        try:
            info = await cluster.topic(topic, refresh=True)
        except BrokerError as exc:
            raise Final(exc) from None
        by_leader: dict[int, list[int]] = {}
        for p in remaining:
            part = info.partition(p)
            if part is None:
                raise Final(BrokerError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"list offsets of '{topic}'",
                    f"topic '{topic}' has no partition {p} (it has {len(info.partitions)})",
                ))
            if part.leader < 0:
                raise BrokerError(ErrorCode.LEADER_NOT_AVAILABLE, f"list offsets of '{topic}'",
                                  f"partition {p} has no leader")
            by_leader.setdefault(part.leader, []).append(p)
        results = await asyncio.gather(
            *(_ask_leader(cluster, leader, topic, {p: remaining[p] for p in parts})
              for leader, parts in by_leader.items()),
            return_exceptions=True,
        )
        error: BaseException | None = None
        for r in results:
            if isinstance(r, BaseException):
                error = error or r
                continue
            for p, o in r.items():
                out[p] = o
                remaining.pop(p, None)
        if error is not None:
            raise error

    await with_retries(cluster, attempt, timeout)
    return out


async def _ask_leader(
    cluster: Cluster, leader: int, topic: str, timestamps: Mapping[int, int]
) -> dict[int, OffsetInfo]:
    conn = await cluster.connection_to(leader)
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [{
            "name": topic,
            "partitions": [
                {"partition_index": p, "current_leader_epoch": -1, "timestamp": ts} for p, ts in timestamps.items()
            ],
        }],
        "timeout_ms": int(cluster.request_timeout * 1000),
    }
    response = await conn.request(ApiKey.LIST_OFFSETS, body)
    out: dict[int, OffsetInfo] = {}
    error: BrokerError | None = None
    for t in response["topics"]:
        for p in t["partitions"]:
            index = p["partition_index"]
            if p["error_code"] != ErrorCode.NONE:
                error = error or BrokerError(p["error_code"], f"list offsets of '{topic}' partition {index}")
                continue
            out[index] = OffsetInfo(index, p["offset"], p["timestamp"], p["leader_epoch"])
    if error is not None:
        raise error
    missing = [p for p in timestamps if p not in out]
    if missing:
        raise BrokerError(ErrorCode.UNKNOWN_SERVER_ERROR, f"list offsets of '{topic}'",
                          f"the broker did not answer for partitions {missing}")
    return out
