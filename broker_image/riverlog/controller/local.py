"""The single-node controller: commits metadata records to a local file and applies them.

It decides with the same pure functions (``topic_ops``) the Raft quorum controller will use;
only how records become durable differs. Records are JSON lines, fsynced before they apply, so
an acknowledged admin request survives kill -9; a torn last line is dropped on replay.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from .image import MetadataImage
from .records import Endpoint, ProducerIdsRecord, Record, RegisterBrokerRecord, from_json, to_json
from .topic_ops import NewTopic, Outcome, alter_topic_configs, create_partitions, create_topic, delete_topic

log = logging.getLogger(__name__)

PRODUCER_ID_BLOCK = 1000
ImageListener = Callable[[MetadataImage, MetadataImage], None]


def read_or_create_cluster_id(log_dir: Path, node_id: int, configured: str) -> str:
    """Kafka's ``meta.properties``: the cluster id is fixed at first start and checked after."""
    meta = log_dir / "meta.properties"
    if meta.exists():
        props = dict(
            line.split("=", 1) for line in meta.read_text().splitlines() if "=" in line and not line.startswith("#")
        )
        existing = props.get("cluster.id", "")
        if configured and existing and configured != existing:
            raise ValueError(
                f"cluster.id {configured} does not match {existing} stored in {meta}; "
                "use the original id or a fresh log directory"
            )
        return existing or configured
    cluster_id = configured or uuid.uuid4().hex[:22]
    log_dir.mkdir(parents=True, exist_ok=True)
    tmp = meta.with_suffix(".tmp")
    tmp.write_text(f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\n")
    os.replace(tmp, meta)
    return cluster_id


class LocalController:
    def __init__(self, metadata_dir: Path, node_id: int, cluster_id: str) -> None:
        self.node_id = node_id
        self.dir = metadata_dir
        self.path = metadata_dir / "records.jsonl"
        self.image = MetadataImage(cluster_id=cluster_id)
        self._listeners: list[ImageListener] = []
        self._lock = asyncio.Lock()
        self._pid_block_end = 0
        self._next_pid = 0
        self._placement_start = 0

    @property
    def controller_id(self) -> int:
        return self.node_id

    def subscribe(self, listener: ImageListener) -> None:
        self._listeners.append(listener)

    # Start-up ----------------------------------------------------------------------------

    def replay(self) -> None:
        """Rebuild the image from the records file, dropping a torn final line."""
        self.dir.mkdir(parents=True, exist_ok=True)
        records: list[Record] = []
        good_bytes = 0
        if self.path.exists():
            with open(self.path, "rb") as fh:
                for line in fh:
                    if not line.endswith(b"\n"):
                        break
                    try:
                        records.append(from_json(json.loads(line)))
                    except (ValueError, KeyError, TypeError):
                        log.warning("metadata log %s: dropping unreadable record and all after it", self.path)
                        break
                    good_bytes += len(line)
            if good_bytes != self.path.stat().st_size:
                with open(self.path, "r+b") as fh:
                    fh.truncate(good_bytes)
        self._set_image(self.image.apply(records))

    async def register_broker(self, endpoints: Sequence[Endpoint], rack: str | None) -> None:
        current = self.image.brokers.get(self.node_id)
        record = RegisterBrokerRecord(self.node_id, tuple(endpoints), rack or None, False)
        if current is None or current.endpoints != record.endpoints or current.rack != record.rack:
            await self.commit([record])

    # Committing --------------------------------------------------------------------------

    async def commit(self, records: Sequence[Record]) -> None:
        if not records:
            return
        data = b"".join(json.dumps(to_json(r), separators=(",", ":")).encode() + b"\n" for r in records)
        await asyncio.get_running_loop().run_in_executor(None, self._append_durably, data)
        self._set_image(self.image.apply(records))

    def _append_durably(self, data: bytes) -> None:
        with open(self.path, "ab") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())

    def _set_image(self, new: MetadataImage) -> None:
        old, self.image = self.image, new
        for listener in self._listeners:
            listener(old, new)

    # Admin operations --------------------------------------------------------------------

    async def create_topics(
        self, requests: Sequence[NewTopic], *, validate_only: bool, default_partitions: int,
        default_replication: int,
    ) -> list[Outcome]:
        async with self._lock:
            outcomes: list[Outcome] = []
            image = self.image
            to_commit: list[Record] = []
            for req in requests:
                outcome = create_topic(image, req, default_partitions=default_partitions,
                                       default_replication=default_replication,
                                       start_index=self._placement_start)
                self._placement_start += 1
                if not outcome.error and not validate_only:
                    to_commit.extend(outcome.records)
                    image = image.apply(outcome.records)  # later items see earlier ones
                outcomes.append(outcome)
            await self.commit(to_commit)
            return outcomes

    async def delete_topics(self, items: Sequence[tuple[str | None, uuid.UUID | None]]) -> list[Outcome]:
        async with self._lock:
            outcomes = [delete_topic(self.image, name, topic_id) for name, topic_id in items]
            await self.commit([r for o in outcomes for r in o.records])
            return outcomes

    async def create_partitions(
        self, items: Sequence[tuple[str, int, Sequence[Sequence[int]] | None]], *, validate_only: bool
    ) -> list[Outcome]:
        async with self._lock:
            outcomes = [create_partitions(self.image, name, count, assign) for name, count, assign in items]
            if not validate_only:
                await self.commit([r for o in outcomes for r in o.records])
            return outcomes

    async def alter_topic_configs(
        self, name: str, values: Mapping[str, str | None], *, replace_all: bool, validate_only: bool
    ) -> Outcome:
        async with self._lock:
            outcome = alter_topic_configs(self.image, name, values, replace_all=replace_all)
            if not outcome.error and not validate_only:
                await self.commit(outcome.records)
            return outcome

    async def allocate_producer_id(self) -> int:
        """Producer ids come from blocks recorded in the metadata log, so they never repeat."""
        async with self._lock:
            if self._next_pid == 0 or self._next_pid >= self._pid_block_end:
                start = self.image.next_producer_id
                await self.commit([ProducerIdsRecord(self.node_id, start + PRODUCER_ID_BLOCK)])
                self._next_pid, self._pid_block_end = start, start + PRODUCER_ID_BLOCK
            pid = self._next_pid
            self._next_pid += 1
            return pid
