"""The partitions this broker hosts, kept in step with the metadata image.

When the image changes the manager opens logs for new replicas, applies leadership, ISR and
config changes, points the replica fetchers at the partitions it follows, and removes the logs
of deleted topics and of partitions reassigned away from this broker (renamed first, deleted in
the background, as Kafka does, so a crash mid-delete can't resurrect them; a start-up finds any
leftover and finishes the job). A replica added by a reassignment is a follower like any other:
it fetches from the log start, and the leader proposes it for the ISR once it has caught up.

Logs live in the broker's log directories (``log_dirs.py``). When a disk error takes a directory
offline, every partition in it goes offline here: its waiters fail, its fetcher stops, its log is
let go as a crash would leave it, and requests for it answer KAFKA_STORAGE_ERROR until a restart.

As leader it also turns follower fetches into ISR decisions: expansion when a follower caught
up, shrinking when one lags (``shrink_isrs``, run periodically by the broker). Proposals go to
the controller as AlterPartition requests, batched, at most one in flight per partition; the
partition's maximal ISR keeps the high watermark safe while one is pending.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import BrokerConfig
from ..controller.image import MetadataImage, PartitionImage, TopicImage
from ..controller.partition_ops import AlterPartitionRequest, AlterPartitionResult
from ..metrics import PartitionStats
from ..protocol.errors import ErrorCode, KafkaError
from ..storage import Log, LogConfig
from ..topic_config import effective_configs
from .fetcher import FetcherConfig, ReplicaFetcherManager
from .log_dirs import LogDir, LogDirs
from .partition import Partition

if TYPE_CHECKING:
    from ..controller.api import ControllerApi

log = logging.getLogger(__name__)

# AlterPartition errors after which the leader waits for newer metadata instead of retrying.
_STALE_STATE_ERRORS = frozenset({ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.NEW_LEADER_ELECTED,
                                 ErrorCode.INVALID_UPDATE_VERSION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.INVALID_REQUEST})

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
        delete_retention_ms=int(values["delete.retention.ms"]),
        min_cleanable_dirty_ratio=float(values["min.cleanable.dirty.ratio"]),
        min_compaction_lag_ms=int(values["min.compaction.lag.ms"]),
        max_compaction_lag_ms=int(values["max.compaction.lag.ms"]),
    )


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


class ReplicaManager:
    def __init__(self, config: BrokerConfig, node_id: int, log_dirs: LogDirs,
                 on_follower_append: Callable[[Partition], None] | None = None,
                 on_partitions_offline: Callable[[], None] | None = None) -> None:
        self.config = config
        self.node_id = node_id
        self.log_dirs = log_dirs
        log_dirs.on_offline = self._dir_went_offline
        self.on_partitions_offline = on_partitions_offline
        self._loop: asyncio.AbstractEventLoop | None = None
        # Where each partition found at start-up lives; new ones are placed by log_dirs.choose().
        self._found: dict[str, Path] = {}
        # Partitions per log directory, kept as they come and go: counting them for every new
        # partition would cost O(partitions) each, O(n^2) for a topic of thousands.
        self._dir_load: dict[Path, int] = {}
        self.partitions: dict[tuple[str, int], Partition] = {}
        self._now_ms = 0
        self.image = MetadataImage()
        self.replica_lag_time_max_ms = config.get_int("replica.lag.time.max.ms")
        self.controller: ControllerApi | None = None
        self.broker_epoch = -1
        self.fetchers = ReplicaFetcherManager(node_id, FetcherConfig.from_broker(config), self._endpoint_of,
                                              lambda: self.broker_epoch, on_follower_append)
        self._proposals: dict[tuple[str, int], tuple[Partition, AlterPartitionRequest]] = {}
        self._sender: asyncio.Task[None] | None = None
        self._retry_backoff_s = max(0.05, config.get_int("replica.fetch.backoff.ms") / 1000)

    # Lookups -----------------------------------------------------------------------------

    def get(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    def leader_partition(self, topic: str, partition: int, current_leader_epoch: int = -1) -> Partition:
        p = self.partitions.get((topic, partition))
        if p is None:
            raise KafkaError("", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        p.check_leader(current_leader_epoch)
        return p

    def online_partitions(self) -> list[Partition]:
        # A copy: flush threads call this while the event loop may add or remove partitions.
        return [p for p in list(self.partitions.values()) if not p.offline]

    def stats(self) -> Iterator[PartitionStats]:
        for (topic, index), p in list(self.partitions.items()):
            yield (topic, index, p.log.size_bytes(), p.log.log_start_offset, p.log.log_end_offset,
                   p.high_watermark, p.is_leader, len(p.isr), len(p.replicas))

    # Image changes -----------------------------------------------------------------------

    def load(self, image: MetadataImage, now_ms: int) -> None:
        """At start-up: recover every hosted log (in parallel threads) and clear deleted ones."""
        self._now_ms = now_ms
        self.image = image
        self._found = self._scan_log_dirs()
        wanted = list(self._hosted(image))
        on_disk = [item for item in wanted if partition_dir_name(item[0].name, item[1].partition) in self._found]
        with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
            opened = list(pool.map(lambda item: (item, self._open_log(image, *item)), on_disk))
        for (topic, part), log_obj in opened:
            self._install(image, topic, part, log_obj)
        # Replicas assigned while we were down: one by one, each placed knowing the others.
        for topic, part in wanted:
            if (topic.name, part.partition) not in self.partitions:
                self._install(image, topic, part, self._open_log(image, topic, part))
        known = {partition_dir_name(t.name, p.partition) for t, p in wanted}
        for d in self.log_dirs.online():
            for entry in d.path.iterdir():
                if entry.is_dir() and entry.name.endswith(DELETE_SUFFIX):
                    shutil.rmtree(entry, ignore_errors=True)
                elif entry.is_dir() and not entry.name.startswith("__cluster_metadata") \
                        and (entry / "partition.metadata").exists() and entry.name not in known:
                    log.info("removing %s: this broker no longer hosts it", entry)
                    shutil.rmtree(entry, ignore_errors=True)
        self._found = {}

    def _scan_log_dirs(self) -> dict[str, Path]:
        """Partition directories already on disk, by name, in every log directory we can read."""
        found: dict[str, Path] = {}
        for d in self.log_dirs.dirs:
            try:
                entries = [e for e in d.path.iterdir() if e.is_dir() and (e / "partition.metadata").exists()]
            except OSError as exc:
                log.error("cannot list log directory %s: %s", d.path, exc)
                continue
            for entry in entries:
                if entry.name in found:
                    # Kafka refuses to start on this; we keep the first and say which.
                    log.error("%s exists in two log directories (%s and %s); using the first. Remove the "
                              "stale copy.", entry.name, found[entry.name].parent, d.path)
                    continue
                found[entry.name] = entry
        return found
    def on_image(self, old: MetadataImage, new: MetadataImage, now_ms: int) -> None:
        self._loop = asyncio.get_running_loop()
        self._now_ms = now_ms
        self.image = new
        for topic_name, topic in old.topics.items():
            new_topic = new.topics.get(topic_name)
            if new_topic is None or new_topic.topic_id != topic.topic_id:
                self._remove_topic(topic)
            else:
                self._remove_reassigned_away(new_topic)
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
        """Open (or create) the partition's log where it is, or in the least loaded online
        directory; a disk error takes that directory offline, and a new partition then tries
        the next one. With no directory left the log is a stand-in answering KAFKA_STORAGE_ERROR."""
        name = partition_dir_name(topic.name, part.partition)
        config = log_config_from(effective_configs(image.topic_configs(topic.name), self.config))
        existing = self._found.get(name)
        while True:
            home = self.log_dirs.containing(existing) if existing is not None \
                else self.log_dirs.choose(self._dir_load)
            if home is None or not home.online:
                where = existing or ((home.path if home else self.log_dirs.dirs[0].path) / name)
                log.error("%s-%d is offline on this broker: its log directory %s is offline", topic.name,
                          part.partition, where.parent)
                return Log.unavailable(where, config)
            directory = home.path / name
            try:
                log_obj = self._open_in(directory, topic, config)
            except (OSError, KafkaError) as exc:
                if isinstance(exc, KafkaError) and exc.code != ErrorCode.KAFKA_STORAGE_ERROR:
                    raise
                if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):
                    # The process ran out of descriptors, the disk is fine: this partition
                    # alone is unavailable, and the operator is told the fix.
                    log.error("%s-%d is unavailable on this broker: %s. Raise the open-files limit "
                              "(ulimit -n, LimitNOFILE, or the container's nofile) and restart the broker.",
                              topic.name, part.partition, exc.strerror)
                    return Log.unavailable(directory, config)
                self.log_dirs.fail(home, f"{exc} opening {name}")
                continue
            log_obj.on_io_error = self._on_log_io_error
            return log_obj

    def _open_in(self, directory: Path, topic: TopicImage, config: LogConfig) -> Log:
        directory.mkdir(parents=True, exist_ok=True)
        meta = directory / "partition.metadata"
        if not meta.exists():
            meta.write_text(f"version: 0\ntopic_id: {topic.topic_id}\n")
        return Log.open(directory, config, now_ms=self._now_ms)

    # Log directory failures --------------------------------------------------------------

    def _on_log_io_error(self, log_obj: Log, exc: OSError) -> None:
        """A log hit a disk error (any thread): its directory goes offline."""
        home = self.log_dirs.containing(log_obj.directory)
        if home is not None:
            self.log_dirs.fail(home, f"{exc.strerror or exc} in {log_obj.directory.name}")

    def _dir_went_offline(self, home: LogDir) -> None:
        # Partitions, waiters and fetchers belong to the event loop: hand the work over to it
        # (at start-up, before there is one serving, do it here).
        loop = self._loop
        if loop is None or loop.is_closed():
            self._take_offline(home)
        else:
            loop.call_soon_threadsafe(self._take_offline, home)

    def _take_offline(self, home: LogDir) -> None:
        taken = []
        for key, p in self.partitions.items():
            if p.offline or p.log.directory.parent != home.path:
                continue
            p.offline = True
            self.fetchers.unfollow(p)
            self._proposals.pop(key, None)
            p.fail_waiters(ErrorCode.KAFKA_STORAGE_ERROR)
            p.leader = -1
            try:
                p.log.abandon()  # no flush, no checkpoint: the next start recovers it
            except Exception:
                log.exception("letting go of %s-%d failed", p.topic, p.index)
            taken.append(f"{p.topic}-{p.index}")
        if taken:
            log.error("partitions offline on this broker with log directory %s: %s", home.path, ", ".join(taken))
            if self.on_partitions_offline is not None:
                self.on_partitions_offline()
    def _install(self, image: MetadataImage, topic: TopicImage, part: PartitionImage, log_obj: Log) -> None:
        cfg = effective_configs(image.topic_configs(topic.name), self.config)
        p = Partition(topic.name, part.partition, topic.topic_id, log_obj, self.node_id,
                      min_insync_replicas=int(cfg["min.insync.replicas"]),
                      replica_lag_time_max_ms=self.replica_lag_time_max_ms, offline=log_obj.closed)
        self.partitions[(topic.name, part.partition)] = p
        parent = log_obj.directory.parent
        self._dir_load[parent] = self._dir_load.get(parent, 0) + 1
        self._apply_partition(p, topic, part)

    def _apply_partition(self, p: Partition, topic: TopicImage, part: PartitionImage) -> None:
        if p.offline:
            return  # neither leads nor follows until a restart brings its directory back
        now = self._now_ms
        if part.leader == self.node_id:
            self.fetchers.unfollow(p)
            live = self.image.live_broker_ids()
            p.ineligible = frozenset(r for r in part.replicas if r not in live)
            if not p.is_leader or p.leader_epoch != part.leader_epoch:
                log.info("broker %d leads %s-%d in epoch %d from offset %d, ISR %s", self.node_id, p.topic, p.index,
                         part.leader_epoch, p.log.log_end_offset, list(part.isr))
                p.become_leader(part.leader_epoch, part.replicas, part.isr, partition_epoch=part.partition_epoch,
                                now_ms=now)
            elif part.partition_epoch != p.partition_epoch:
                p.update_assignment(part.partition_epoch, part.replicas, part.isr, now)
            return
        if p.is_leader or p.leader != part.leader or p.leader_epoch != part.leader_epoch \
                or p.partition_epoch != part.partition_epoch:
            p.become_follower(part.leader, part.leader_epoch, part.partition_epoch, part.replicas, part.isr)
        leader = self.image.brokers.get(part.leader)
        if part.leader >= 0 and leader is not None:
            self.fetchers.follow(p)
        else:
            self.fetchers.unfollow(p)  # offline partition: nobody to fetch from

    @staticmethod
    def _now() -> int:
        return int(time.time() * 1000)

    def _endpoint_of(self, broker_id: int) -> tuple[str, int] | None:
        broker = self.image.brokers.get(broker_id)
        if broker is None:
            return None
        ep = broker.endpoint(self.config.inter_broker_listener()) or broker.endpoint()
        return (ep.host, ep.port) if ep is not None else None

    def _remove_topic(self, topic: TopicImage) -> None:
        for key in [k for k in self.partitions if k[0] == topic.name]:
            self._remove_partition(key, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    def _remove_reassigned_away(self, topic: TopicImage) -> None:
        """Drop the replicas of ``topic`` a reassignment took off this broker."""
        for key in [k for k in self.partitions if k[0] == topic.name]:
            part = topic.partitions.get(key[1])
            if part is not None and self.node_id not in part.replicas:
                log.info("broker %d is no longer a replica of %s-%d (replicas %s): deleting its log",
                         self.node_id, key[0], key[1], list(part.replicas))
                # Clients waiting here retry on the leader the metadata now names.
                self._remove_partition(key, ErrorCode.NOT_LEADER_OR_FOLLOWER)

    def _remove_partition(self, key: tuple[str, int], code: ErrorCode) -> None:
        p = self.partitions.pop(key)
        self._dir_load[p.log.directory.parent] -= 1
        self.fetchers.unfollow(p)
        self._proposals.pop(key, None)
        p.fail_waiters(code)
        p.leader = -1  # a late AlterPartition answer must not act on it as a leader
        directory = p.log.directory
        p.log.close()
        target = directory.with_name(f"{directory.name}.{uuid.uuid4().hex}{DELETE_SUFFIX}")
        try:
            os.replace(directory, target)
            shutil.rmtree(target, ignore_errors=True)
        except OSError:
            log.exception("could not delete %s", directory)

    # ISR changes (leader side) ------------------------------------------------------------

    def attach(self, controller: ControllerApi, broker_epoch: int) -> None:
        """Registered: ISR changes may now be proposed, and fetches carry our broker epoch."""
        self._loop = asyncio.get_running_loop()
        self.controller = controller
        self.broker_epoch = broker_epoch

    def isr_eligible(self, replica_id: int, broker_epoch: int) -> bool:
        """KIP-903: a replica may join an ISR only if it is registered, unfenced, and fetched
        from the registration the image knows (not from a previous life of that broker)."""
        broker = self.image.brokers.get(replica_id)
        return broker is not None and not broker.fenced and (broker_epoch < 0 or broker_epoch == broker.epoch)

    def record_follower_fetch(self, p: Partition, replica_id: int, fetch_offset: int, broker_epoch: int,
                              now_ms: int) -> None:
        """A follower fetched from us: move the high watermark, and propose it for the ISR if
        it has caught up."""
        p.update_follower(replica_id, fetch_offset, broker_epoch, now_ms)
        if p.pending_isr is None and p.expansion_candidate(replica_id) \
                and self.isr_eligible(replica_id, p.followers[replica_id].broker_epoch):
            new_isr = tuple(r for r in p.replicas if r in p.isr or r == replica_id)
            log.info("broker %d: %s-%d follower %d caught up at %d, proposing ISR %s", self.node_id, p.topic,
                     p.index, replica_id, fetch_offset, list(new_isr))
            self._propose(p, new_isr)

    def shrink_isrs(self, now_ms: int) -> None:
        """Propose removing followers that lag more than replica.lag.time.max.ms (periodic)."""
        for p in self.online_partitions():
            if not p.is_leader or p.pending_isr is not None or len(p.isr) <= 1:
                continue
            lagging = set(p.out_of_sync_replicas(now_ms))
            if lagging:
                new_isr = tuple(r for r in p.isr if r not in lagging)
                log.info("broker %d: %s-%d followers %s lag more than %d ms, proposing ISR %s", self.node_id,
                         p.topic, p.index, sorted(lagging), p.replica_lag_time_max_ms, list(new_isr))
                self._propose(p, new_isr)

    def _propose(self, p: Partition, new_isr: tuple[int, ...]) -> None:
        if self.controller is None or not p.is_leader or self._now() < p.next_isr_proposal_ms:
            return
        p.pending_isr = new_isr
        epochs = tuple(p.followers[r].broker_epoch if r in p.followers else self.broker_epoch for r in new_isr)
        request = AlterPartitionRequest(p.topic_id, p.index, p.leader_epoch, p.partition_epoch, new_isr, epochs)
        self._proposals[(p.topic, p.index)] = (p, request)
        if self._sender is None or self._sender.done():
            self._sender = asyncio.get_running_loop().create_task(self._send_proposals())

    async def _send_proposals(self) -> None:
        """Send queued proposals as one AlterPartition call at a time (Kafka batches them too)."""
        while self._proposals and self.controller is not None:
            batch, self._proposals = self._proposals, {}
            requests = [req for _, req in batch.values()]
            try:
                outcome = await self.controller.alter_partition(self.node_id, self.broker_epoch, requests)
            except Exception:
                log.exception("broker %d: AlterPartition failed; retrying", self.node_id)
                await asyncio.sleep(self._retry_backoff_s)
                for key, item in batch.items():
                    self._proposals.setdefault(key, item)
                continue
            if outcome.error != ErrorCode.NONE:
                log.warning("broker %d: AlterPartition refused: %s", self.node_id, outcome.error.name)
                for p, _ in batch.values():
                    p.pending_isr = None
                    p.next_isr_proposal_ms = self._now() + int(self._retry_backoff_s * 1000)
                continue
            by_key = {(r.topic_id, r.partition): r for r in outcome.results}
            for p, req in batch.values():
                result = by_key.get((req.topic_id, req.partition))
                if result is not None:
                    self._proposal_answered(p, req, result)

    def _proposal_answered(self, p: Partition, req: AlterPartitionRequest, result: AlterPartitionResult) -> None:
        if p.pending_isr != req.new_isr or p.leader_epoch != req.leader_epoch or not p.is_leader:
            return  # leadership or the proposal changed meanwhile
        p.pending_isr = None
        if result.error == ErrorCode.NONE:
            # Apply the committed state now: with a remote controller the image may come later.
            if result.leader_epoch == p.leader_epoch:
                p.update_assignment(result.partition_epoch, p.replicas, result.isr, self._now_ms)
            return
        # Not again before the backoff: the state that made it fail (stale metadata, a replica
        # that is not eligible) needs time, and a fetch would otherwise re-propose at once.
        p.next_isr_proposal_ms = self._now() + int(self._retry_backoff_s * 1000)
        level = logging.INFO if result.error in _STALE_STATE_ERRORS else logging.WARNING
        log.log(level, "broker %d: ISR change of %s-%d to %s refused: %s %s", self.node_id, p.topic, p.index,
                list(req.new_isr), result.error.name, result.message or "")

    # Housekeeping ------------------------------------------------------------------------

    def maintenance(self, now_ms: int) -> None:
        for p in self.online_partitions():
            try:
                p.log.maintenance(now_ms)
            except Exception:
                log.exception("maintenance of %s-%d failed", p.topic, p.index)

    def flush_all(self) -> None:
        """fsync every log (called from a worker thread; a log deleted meanwhile is skipped)."""
        for p in self.online_partitions():
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
        self._dir_load.clear()
        if self._sender is not None:
            self._sender.cancel()

    def abandon(self) -> None:
        """Let go of every log as a crash would: files closed, no checkpoint, no clean-shutdown
        marker, so the next start recovers (in-process tests use it to "kill" a broker)."""
        for p in self.partitions.values():
            p.fail_waiters(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            try:
                p.log.abandon()
            except Exception:
                log.exception("abandoning %s-%d failed", p.topic, p.index)
        self.partitions.clear()
        self._dir_load.clear()
        if self._sender is not None:
            self._sender.cancel()
