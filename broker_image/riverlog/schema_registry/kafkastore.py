"""The ``_schemas`` topic as the registry's only storage: created if absent, read from the start
and followed by every instance, written (acks=all) by the elected writer.

A write returns once this instance has read the record back, so its answer reflects the log.
Before an instance serves writes after being elected it writes a NOOP and reads until it sees
it: by then it has applied every record any earlier writer got acknowledged, so the next id it
hands out is above every id ever issued.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence

from ..client import EARLIEST, LATEST, AdminClient, BrokerError, ClientError, Consumer, Producer
from ..protocol.errors import ErrorCode, KafkaError
from ..security.client_config import ClientSecurity
from . import errors
from .records import Record, noop_record, stamp
from .store import Store

log = logging.getLogger(__name__)

WRITE_TIMEOUT = 30.0
BROKER_WAIT = 30.0


def topic_settings(brokers: int) -> tuple[int, dict[str, str]]:
    """Replication factor and configs of a new ``_schemas``: compacted (the log is the state),
    up to 3 copies, and acks=all writes that need two of them where there are three, so a write
    survives a broker loss and one broker down does not stop writes."""
    replication = max(1, min(3, brokers))
    min_insync = 2 if replication >= 3 else 1
    return replication, {"cleanup.policy": "compact", "min.insync.replicas": str(min_insync)}


class KafkaLog:
    """One instance's view of ``_schemas``: the reader task feeding ``store`` and the writer's
    ``append``."""

    def __init__(self, bootstrap: str, topic: str, store: Store, *, security: ClientSecurity | None = None,
                 client_id: str = "riverlog-schema-registry") -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.store = store
        self.security = security
        self.client_id = client_id
        self.position = 0  # next offset the reader will read
        self._progress = asyncio.Condition()
        self._reader: asyncio.Task[None] | None = None
        self._consumer: Consumer | None = None
        self._producer: Producer | None = None
        self.cluster_id = ""
        # Brokers to wait for (up to BROKER_WAIT seconds) before creating _schemas, whose copies
        # are min(3, brokers registered then): set by the in-broker registry, which starts with
        # its broker and so may see a cluster still coming up.
        self.expected_brokers = 1
        # The epoch this instance claimed as the writer (None: not the writer); every record it
        # writes carries it, and readers ignore records of an epoch later claims superseded.
        self.writer_epoch: int | None = None
        # Called (by the reader) when a fenced-off record needs rewriting and we are the writer.
        self.on_repair_needed: Callable[[], None] | None = None

    # --- start and stop ---------------------------------------------------------------------------

    async def start(self, *, timeout: float = 60.0) -> None:
        """Create the topic if needed, then read it to its current end before returning."""
        deadline = time.monotonic() + timeout
        await self._ensure_topic(timeout)
        self._consumer = Consumer(self.bootstrap, client_id=self.client_id, security=self.security,
                                  max_wait_ms=200)
        while True:
            # A topic just created may have no leader for a moment: wait for one.
            try:
                await self._consumer.assign(self.topic, [0], start=EARLIEST)
                end = await self._end_offset()
                break
            except (ClientError, KafkaError, OSError) as exc:
                if time.monotonic() > deadline:
                    raise
                log.info("schema registry: %s not readable yet: %s", self.topic, exc)
                await asyncio.sleep(0.3)
        self._reader = asyncio.get_running_loop().create_task(self._read_forever())
        if not await self.wait_for_offset(end - 1, timeout):
            raise errors.store_timeout(f"reading {self.topic} to offset {end} took longer than {timeout:.0f}s")
        log.info("schema registry: read %s up to offset %d: %d subjects, %d schemas", self.topic, end,
                 len(self.store.subjects()), self.store.schema_count())

    async def stop(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        if self._producer is not None:
            with contextlib.suppress(Exception):
                await self._producer.close(flush=False)
        if self._consumer is not None:
            await self._consumer.close()

    async def _ensure_topic(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        wait_until = time.monotonic() + min(BROKER_WAIT, timeout / 2)
        async with AdminClient(self.bootstrap, client_id=self.client_id, security=self.security) as admin:
            while True:
                try:
                    cluster = await admin.describe_cluster()
                    self.cluster_id = cluster.cluster_id or ""
                    existing = await admin.list_topics(include_internal=True)
                    if any(t.name == self.topic for t in existing):
                        return
                    if len(cluster.brokers) < self.expected_brokers and time.monotonic() < wait_until:
                        log.info("schema registry: %d of %d brokers registered; waiting before creating %s",
                                 len(cluster.brokers), self.expected_brokers, self.topic)
                        await asyncio.sleep(0.5)
                        continue
                    replication, configs = topic_settings(len(cluster.brokers))
                    await admin.create_topic(self.topic, 1, replication, configs)
                    log.info("schema registry: created topic %s (1 partition, replication factor %d, %s)",
                             self.topic, replication, ", ".join(f"{k}={v}" for k, v in configs.items()))
                    return
                except BrokerError as exc:
                    if exc.code == ErrorCode.TOPIC_ALREADY_EXISTS:
                        return  # another instance was quicker
                    if time.monotonic() > deadline:
                        raise
                    log.warning("schema registry: cannot create %s yet: %s", self.topic, exc)
                except (ClientError, OSError) as exc:
                    if time.monotonic() > deadline:
                        raise
                    log.warning("schema registry: brokers at %s not reachable yet: %s", self.bootstrap, exc)
                await asyncio.sleep(0.5)

    async def _end_offset(self) -> int:
        async with AdminClient(self.bootstrap, client_id=self.client_id, security=self.security) as admin:
            return (await admin.list_offsets(self.topic, 0, LATEST)).offset

    # --- reading ----------------------------------------------------------------------------------

    async def _read_forever(self) -> None:
        assert self._consumer is not None
        while True:
            try:
                records = await self._consumer.poll()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the brokers come and go; the reader must not
                log.warning("schema registry: reading %s failed, retrying: %s", self.topic, exc)
                await asyncio.sleep(0.5)
                continue
            for record in records:
                self.store.apply(record.key, record.value, record.offset)
            if self.store.unrepaired and self.writer_epoch is not None and self.on_repair_needed is not None:
                self.on_repair_needed()
            position = self._consumer.position(self.topic, 0)
            if position != self.position:
                self.position = position
                async with self._progress:
                    self._progress.notify_all()

    async def wait_for_offset(self, offset: int, timeout: float) -> bool:
        """Wait until the record at ``offset`` has been read (True), or ``timeout`` passed."""
        async with self._progress:
            try:
                await asyncio.wait_for(self._progress.wait_for(lambda: self.position > offset), timeout)
            except TimeoutError:
                return False
        return True

    # --- writing ----------------------------------------------------------------------------------

    async def append(self, records: Sequence[Record]) -> None:
        """Write ``records`` with acks=all, stamped with our writer epoch, and wait until the
        reader has applied them; a write a newer writer fenced off is an error, not a success."""
        if self.writer_epoch is not None:
            records = [stamp(record, self.writer_epoch) for record in records]
        offsets = await self._produce(records)
        if any(offset in self.store.rejected for offset in offsets):
            self.writer_epoch = None
            raise errors.store_error("this instance's write was fenced off: another instance has become the "
                                     "writer; retry")

    async def _produce(self, records: Sequence[Record]) -> list[int]:
        if self._producer is None:
            # Idle after a write: linger 0. One batch in flight keeps a retried write in order.
            self._producer = Producer(self.bootstrap, acks="all", linger_ms=0, max_in_flight=1,
                                      client_id=f"{self.client_id}-writer", security=self.security,
                                      delivery_timeout=WRITE_TIMEOUT)
            await self._producer.start()
        try:
            futures = [await self._producer.send(self.topic, value, key, partition=0) for key, value in records]
            offsets = [(await future).offset for future in futures]
        except (ClientError, KafkaError, OSError) as exc:
            raise errors.store_error(f"writing to {self.topic}: {exc}") from None
        if not await self.wait_for_offset(max(offsets), WRITE_TIMEOUT):
            raise errors.store_timeout(f"the write at offset {max(offsets)} of {self.topic} was not read back "
                                       f"within {WRITE_TIMEOUT:.0f}s")
        return offsets

    async def catch_up_as_writer(self) -> None:
        """Claim the next writer epoch with a NOOP and read up to it: by then every record an
        earlier writer got acknowledged is applied (so ``max_id + 1`` is a new id), and records
        an earlier writer sends from now on are ignored by every reader."""
        self.writer_epoch = None
        epoch = self.store.writer_epoch + 1
        (offset,) = await self._produce([noop_record(self.store.max_id, epoch)])
        if (self.store.writer_epoch, self.store.writer_epoch_offset) != (epoch, offset):
            # Another instance claimed this epoch first (two instances each thought they had won).
            raise errors.store_error(f"writer epoch {epoch} was claimed by another instance")
        self.writer_epoch = epoch

    @property
    def fenced(self) -> bool:
        return self.writer_epoch is None
