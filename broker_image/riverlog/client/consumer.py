"""A minimal async consumer: assigned partitions, Fetch from each leader, no consumer group.

Positions start at the earliest or latest offset or at a given one. Each :meth:`Consumer.poll`
sends one Fetch per leader (concurrently), decodes the returned batches (decompressing them),
drops records below the position (a fetch returns whole batches, which may start earlier) and
advances the position past every complete batch, control batches included.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.primitives import ZERO_UUID
from ..protocol.record_batch import HEADER_SIZE, MIN_BATCH_LENGTH, corrupt, decode_records, read_header
from ..security.client_config import ClientSecurity
from .cluster import Cluster
from .errors import STALE_METADATA_CODES, BrokerError, BrokerUnreachableError, ClientError, ConnectionClosedError
from .offsets import EARLIEST, LATEST, list_offsets

log = logging.getLogger(__name__)

_FIRST_TOPIC_ID_VERSION = 13
# Largest per-partition fetch size we grow to when a single batch does not fit (Kafka brokers
# return at least one whole batch anyway; this guards against brokers that do not).
_MAX_PARTITION_FETCH_BYTES = 64 * 1024 * 1024

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class ConsumerRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: str  # "CreateTime" or "LogAppendTime"
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def decode_fetched(
    topic: str, partition: int, data: bytes | memoryview, position: int
) -> tuple[list[ConsumerRecord], int, bool]:
    """Records at or after ``position`` in a fetched ``records`` field.

    Returns (records, next position, whether at least one complete batch was present). A
    trailing partial batch (the broker cut at the size limit) is ignored, as Kafka clients do.
    """
    out: list[ConsumerRecord] = []
    pos = 0
    complete = False
    while len(data) - pos >= HEADER_SIZE:
        header = read_header(data, pos)
        if header.batch_length < MIN_BATCH_LENGTH:
            raise corrupt(f"fetched batch at offset {header.base_offset} has an invalid length")
        if header.end > len(data):
            break
        complete = True
        if not header.is_control:
            ts_type = "LogAppendTime" if header.is_log_append_time else "CreateTime"
            for r in decode_records(data, header):
                if r.offset >= position:
                    out.append(ConsumerRecord(topic, partition, r.offset, r.timestamp, ts_type,
                                              r.key, r.value, r.headers))
        position = max(position, header.next_offset)
        pos = header.end
    return out, position, complete


class Consumer:
    """Read assigned partitions of topics on a cluster reached through ``bootstrap``.

    ``auto_offset_reset`` ("earliest", "latest" or "none") decides what happens when a position
    falls outside the log (records deleted by retention, or an offset past the end).
    """

    def __init__(
        self,
        bootstrap: str,
        *,
        client_id: str = "riverlog-consumer",
        max_wait_ms: int = 500,
        min_bytes: int = 1,
        max_bytes: int = 50 * 1024 * 1024,
        partition_max_bytes: int = 1024 * 1024,
        auto_offset_reset: str = "earliest",
        connect_timeout: float = 10.0,
        request_timeout: float = 30.0,
        security: ClientSecurity | None = None,
    ) -> None:
        if auto_offset_reset not in ("earliest", "latest", "none"):
            raise ValueError("auto_offset_reset must be earliest, latest or none")
        self.cluster = Cluster(bootstrap, client_id=client_id, connect_timeout=connect_timeout,
                               request_timeout=request_timeout, security=security)
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.partition_max_bytes = partition_max_bytes
        self.auto_offset_reset = auto_offset_reset
        self._positions: dict[TopicPartition, int] = {}
        self._fetch_sizes: dict[TopicPartition, int] = {}
        self._backoff_until = 0.0

    async def __aenter__(self) -> Consumer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.cluster.close()

    # --- assignment -----------------------------------------------------------------------------

    async def assign(self, topic: str, partitions: Sequence[int] | None = None, *, start: int = LATEST) -> list[int]:
        """Start reading ``topic`` (all partitions unless some are named) at ``start``:
        EARLIEST (-2), LATEST (-1) or an offset (>= 0) applied to every named partition."""
        info = await self.cluster.topic(topic, refresh=True)
        available = [p.partition for p in info.partitions]
        chosen = list(available if partitions is None else partitions)
        for p in chosen:
            if p not in available:
                raise BrokerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"assign {topic}-{p}",
                                  f"topic '{topic}' has no partition {p} (it has {len(available)})")
        if start >= 0:
            for p in chosen:
                self._positions[(topic, p)] = start
        else:
            offsets = await list_offsets(self.cluster, topic, {p: start for p in chosen},
                                         timeout=self.cluster.request_timeout)
            for p in chosen:
                self._positions[(topic, p)] = offsets[p].offset
        return chosen

    def seek(self, topic: str, partition: int, offset: int) -> None:
        self._positions[(topic, partition)] = offset

    def position(self, topic: str, partition: int) -> int:
        return self._positions[(topic, partition)]

    def assignment(self) -> list[TopicPartition]:
        return sorted(self._positions)

    # --- fetching -------------------------------------------------------------------------------

    async def poll(self, max_wait_ms: int | None = None) -> list[ConsumerRecord]:
        """One round of Fetch requests, each waiting up to ``max_wait_ms`` (default: the
        consumer's) for data to arrive; may return nothing."""
        if not self._positions:
            raise ClientError("no partitions assigned: call assign() first")
        delay = self._backoff_until - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in self._positions:
            info = self.cluster.topics.get(tp[0]) or await self.cluster.topic(tp[0])
            part = info.partition(tp[1])
            if part is None or part.leader < 0:
                await self._stale(tp[0])
                continue
            by_leader.setdefault(part.leader, []).append(tp)
        results = await asyncio.gather(
            *(self._fetch_from(leader, tps, self.max_wait_ms if max_wait_ms is None else max_wait_ms)
              for leader, tps in by_leader.items()),
            return_exceptions=True,
        )
        records: list[ConsumerRecord] = []
        for result in results:
            if isinstance(result, ConnectionClosedError | BrokerUnreachableError):
                log.warning("fetch failed, will retry: %s", result)
                await self._stale(None)
            elif isinstance(result, BaseException):
                raise result
            else:
                records.extend(result)
        return records

    async def _stale(self, topic: str | None) -> None:
        """Leadership changed or a broker went away: refresh metadata and back off briefly."""
        self._backoff_until = time.monotonic() + 0.2
        with contextlib.suppress(KafkaError, ClientError, OSError):
            if topic is None:
                await self.cluster.refresh_metadata(sorted({t for t, _ in self._positions}))
            else:
                await self.cluster.topic(topic, refresh=True)

    async def _fetch_from(self, leader: int, tps: list[TopicPartition], max_wait_ms: int) -> list[ConsumerRecord]:
        conn = await self.cluster.connection_to(leader)
        version = conn.version_for(ApiKey.FETCH)
        ids: dict[str, uuid.UUID] = {}
        for topic, _ in tps:
            info = self.cluster.topics.get(topic)
            ids[topic] = info.topic_id if info else ZERO_UUID
        if version >= _FIRST_TOPIC_ID_VERSION and any(i == ZERO_UUID for i in ids.values()):
            version = _FIRST_TOPIC_ID_VERSION - 1  # name topics whose id we do not know
        topics: dict[str, list[dict[str, Any]]] = {}
        for topic, partition in tps:
            topics.setdefault(topic, []).append({
                "partition": partition,
                "current_leader_epoch": -1,
                "fetch_offset": self._positions[(topic, partition)],
                "last_fetched_epoch": -1,
                "log_start_offset": -1,
                "partition_max_bytes": self._fetch_sizes.get((topic, partition), self.partition_max_bytes),
            })
        body = {
            "replica_id": -1,
            "max_wait_ms": max_wait_ms,
            "min_bytes": self.min_bytes,
            "max_bytes": self.max_bytes,
            "isolation_level": 0,
            "session_id": 0,  # no fetch session: every request is a full fetch
            "session_epoch": -1,
            "topics": [{"topic": t, "topic_id": ids[t], "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
        timeout = self.cluster.request_timeout + max_wait_ms / 1000
        response = await conn.request(ApiKey.FETCH, body, version, timeout=timeout)
        if response.get("error_code", 0) != ErrorCode.NONE:
            raise BrokerError(response["error_code"], "fetch")
        names_by_id = {v: k for k, v in ids.items()}
        records: list[ConsumerRecord] = []
        for t in response["responses"]:
            topic = t.get("topic") or names_by_id.get(t.get("topic_id") or ZERO_UUID, "")
            for p in t["partitions"]:
                tp = (topic, p["partition_index"])
                if tp not in self._positions:
                    continue
                records.extend(await self._partition_result(tp, p))
        return records

    async def _partition_result(self, tp: TopicPartition, p: dict[str, Any]) -> list[ConsumerRecord]:
        code = p["error_code"]
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            await self._reset(tp)
            return []
        if code in STALE_METADATA_CODES:
            await self._stale(tp[0])
            return []
        if code != ErrorCode.NONE:
            raise BrokerError(code, f"fetch {tp[0]}-{tp[1]}")
        data = p.get("records")
        if not data:
            return []
        position = self._positions[tp]
        records, next_position, complete = decode_fetched(tp[0], tp[1], data, position)
        self._positions[tp] = next_position
        if not complete:
            # Not even one whole batch fitted: ask for more next time.
            size = self._fetch_sizes.get(tp, self.partition_max_bytes)
            if size >= _MAX_PARTITION_FETCH_BYTES:
                raise ClientError(f"a record batch in {tp[0]}-{tp[1]} at offset {position} is larger "
                                  f"than {_MAX_PARTITION_FETCH_BYTES} bytes")
            self._fetch_sizes[tp] = size * 2
        return records

    async def _reset(self, tp: TopicPartition) -> None:
        if self.auto_offset_reset == "none":
            raise BrokerError(ErrorCode.OFFSET_OUT_OF_RANGE, f"fetch {tp[0]}-{tp[1]}",
                              f"offset {self._positions[tp]} is outside the log")
        start = EARLIEST if self.auto_offset_reset == "earliest" else LATEST
        offsets = await list_offsets(self.cluster, tp[0], {tp[1]: start}, timeout=self.cluster.request_timeout)
        log.info("%s-%d: offset %d out of range, reset to %s offset %d", tp[0], tp[1],
                 self._positions[tp], self.auto_offset_reset, offsets[tp[1]].offset)
        self._positions[tp] = offsets[tp[1]].offset

    async def records(
        self, *, max_records: int | None = None, idle_timeout: float | None = None
    ) -> AsyncIterator[ConsumerRecord]:
        """Yield records as they arrive, stopping after ``max_records`` or when nothing new has
        arrived for ``idle_timeout`` seconds (both optional: without them, run until cancelled)."""
        count = 0
        if max_records is not None and max_records <= 0:
            return
        last_activity = time.monotonic()
        while True:
            wait_ms = self.max_wait_ms
            if idle_timeout is not None:
                # Do not let the broker hold a fetch past the moment we would give up anyway.
                left = idle_timeout - (time.monotonic() - last_activity)
                wait_ms = max(0, min(wait_ms, int(left * 1000)))
            batch = await self.poll(wait_ms)
            if batch:
                last_activity = time.monotonic()
            for record in batch:
                yield record
                count += 1
                if max_records is not None and count >= max_records:
                    return
            if idle_timeout is not None and time.monotonic() - last_activity >= idle_timeout:
                return
