"""The partitions this broker hosts, kept in step with the metadata image.

When the image changes the manager opens logs for new replicas, applies leadership and config
changes, and removes the logs of deleted topics (renamed first, deleted in the background, as
Kafka does, so a crash mid-delete can't resurrect a topic).
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..config import BrokerConfig
from ..controller.image import MetadataImage, PartitionImage, TopicImage
from ..metrics import PartitionStats
from ..protocol.errors import ErrorCode, KafkaError
from ..storage import Log, LogConfig
from ..topic_config import effective_configs
from .partition import Partition

log = logging.getLogger(__name__)

DELETE_SUFFIX = "-delete"


def log_config_from(values: dict[str, str]) -> LogConfig:
    """Storage settings from a topic's effective configs."""
    flush = int(values["flush.messages"])
    return LogConfig(
        segment_bytes=int(values["segment.bytes"]),
        segment_ms=int(values["segment.ms"]),
        segment_index_bytes=int(values["segment.index.bytes"]),
        index_interval_bytes=int(values["index.interval.bytes"]),
        retention_ms=int(values["retention.ms"]),
        retention_bytes=int(values["retention.bytes"]),
        max_message_bytes=int(values["max.message.bytes"]),
        message_timestamp_type=values["message.timestamp.type"],
        cleanup_policy=values["cleanup.policy"],
        file_delete_delay_ms=int(values["file.delete.delay.ms"]),
        flush_messages=None if flush >= (1 << 62) else flush,
    )


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


class ReplicaManager:
    def __init__(self, config: BrokerConfig, node_id: int, log_dir: Path) -> None:
        self.config = config
        self.node_id = node_id
        self.log_dir = log_dir
        self.partitions: dict[tuple[str, int], Partition] = {}
        self._now_ms = 0

    # Lookups -----------------------------------------------------------------------------

    def get(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    def leader_partition(self, topic: str, partition: int, current_leader_epoch: int = -1) -> Partition:
        p = self.partitions.get((topic, partition))
        if p is None:
            raise KafkaError("", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        p.check_leader(current_leader_epoch)
        return p

    def stats(self) -> Iterator[PartitionStats]:
        for (topic, index), p in list(self.partitions.items()):
            yield (topic, index, p.log.size_bytes(), p.log.log_start_offset, p.log.log_end_offset,
                   p.high_watermark)

    # Image changes -----------------------------------------------------------------------

    def load(self, image: MetadataImage, now_ms: int) -> None:
        """At start-up: recover every hosted log (in parallel threads) and clear deleted ones."""
        self._now_ms = now_ms
        self.log_dir.mkdir(parents=True, exist_ok=True)
        wanted = list(self._hosted(image))
        with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
            opened = list(pool.map(lambda item: (item, self._open_log(image, *item)), wanted))
        for (topic, part), log_obj in opened:
            self._install(image, topic, part, log_obj)
        known = {partition_dir_name(t.name, p.partition) for t, p in wanted}
        for entry in self.log_dir.iterdir():
            if entry.is_dir() and entry.name.endswith(DELETE_SUFFIX):
                shutil.rmtree(entry, ignore_errors=True)
            elif entry.is_dir() and not entry.name.startswith("__cluster_metadata") \
                    and (entry / "partition.metadata").exists() and entry.name not in known:
                log.info("removing %s: its topic no longer exists", entry.name)
                shutil.rmtree(entry, ignore_errors=True)

    def on_image(self, old: MetadataImage, new: MetadataImage, now_ms: int) -> None:
        self._now_ms = now_ms
        for topic_name, topic in old.topics.items():
            new_topic = new.topics.get(topic_name)
            if new_topic is None or new_topic.topic_id != topic.topic_id:
                self._remove_topic(topic)
        for topic, part in self._hosted(new):
            key = (topic.name, part.partition)
            existing = self.partitions.get(key)
            if existing is None:
                self._install(new, topic, part, self._open_log(new, topic, part))
            else:
                self._apply_partition(existing, topic, part)
            if new.topic_configs(topic.name) != old.topic_configs(topic.name):
                cfg = effective_configs(new.topic_configs(topic.name), self.config)
                p = self.partitions[key]
                p.log.config = log_config_from(cfg)
                p.min_insync_replicas = int(cfg["min.insync.replicas"])

    def _hosted(self, image: MetadataImage) -> Iterator[tuple[TopicImage, PartitionImage]]:
        for topic in image.topics.values():
            for part in topic.partitions.values():
                if self.node_id in part.replicas:
                    yield topic, part

    def _open_log(self, image: MetadataImage, topic: TopicImage, part: PartitionImage) -> Log:
        directory = self.log_dir / partition_dir_name(topic.name, part.partition)
        directory.mkdir(parents=True, exist_ok=True)
        meta = directory / "partition.metadata"
        if not meta.exists():
            meta.write_text(f"version: 0\ntopic_id: {topic.topic_id}\n")
        cfg = effective_configs(image.topic_configs(topic.name), self.config)
        return Log.open(directory, log_config_from(cfg), now_ms=self._now_ms)

    def _install(self, image: MetadataImage, topic: TopicImage, part: PartitionImage, log_obj: Log) -> None:
        cfg = effective_configs(image.topic_configs(topic.name), self.config)
        p = Partition(topic.name, part.partition, topic.topic_id, log_obj, self.node_id,
                      min_insync_replicas=int(cfg["min.insync.replicas"]))
        self.partitions[(topic.name, part.partition)] = p
        self._apply_partition(p, topic, part)

    def _apply_partition(self, p: Partition, topic: TopicImage, part: PartitionImage) -> None:
        if part.leader == self.node_id:
            if not p.is_leader or p.leader_epoch != part.leader_epoch or p.isr != part.isr:
                p.become_leader(part.leader_epoch, part.replicas, part.isr)
        elif p.is_leader:
            p.fail_waiters(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            p.leader = part.leader
            p.leader_epoch = part.leader_epoch

    def _remove_topic(self, topic: TopicImage) -> None:
        for key in [k for k in self.partitions if k[0] == topic.name]:
            p = self.partitions.pop(key)
            p.fail_waiters(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            directory = p.log.directory
            p.log.close()
            target = directory.with_name(f"{directory.name}.{uuid.uuid4().hex}{DELETE_SUFFIX}")
            try:
                os.replace(directory, target)
                shutil.rmtree(target, ignore_errors=True)
            except OSError:
                log.exception("could not delete %s", directory)

    # Housekeeping ------------------------------------------------------------------------

    def maintenance(self, now_ms: int) -> None:
        for p in list(self.partitions.values()):
            try:
                p.log.maintenance(now_ms)
            except Exception:
                log.exception("maintenance of %s-%d failed", p.topic, p.index)

    def flush_all(self) -> None:
        """fsync every log (called from a worker thread; a log deleted meanwhile is skipped)."""
        for p in list(self.partitions.values()):
            try:
                p.log.flush()
            except Exception:
                log.exception("flushing %s-%d failed", p.topic, p.index)

    def close(self) -> None:
        for p in self.partitions.values():
            try:
                p.log.close()
            except Exception:
                log.exception("closing %s-%d failed", p.topic, p.index)
        self.partitions.clear()
