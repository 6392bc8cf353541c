"""When a quorum node snapshots its metadata image, and writing the snapshot.

Every node, voter or observer, snapshots its own image (as every KRaft node does): once
``metadata.log.max.record.bytes.between.snapshots`` bytes of records were applied since the last
snapshot, or ``metadata.log.max.snapshot.interval.ms`` after it if anything was, the image is
written as records (``snapshot.image_to_records``) at the offset it was applied up to, and the
Raft core compacts the log below it. A restart then loads the snapshot and replays only the
rest; a replica behind the leader's log start downloads the leader's snapshot (FetchSnapshot).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from ..image import MetadataImage
from ..raft import RaftError
from ..snapshot import image_to_records
from . import codec
from .driver import RaftDriver

log = logging.getLogger(__name__)

SNAPSHOT_CHECK_MAX_S = 1.0  # how often, at most, the time trigger of snapshots is looked at


class SnapshotScheduler:
    """Counts what a node applies and writes a snapshot of its image when one is due, one at a
    time. ``applied_state`` gives the image and the metadata log offset it was applied up to."""

    def __init__(self, node_id: int, driver: RaftDriver, *, max_bytes: int, interval_ms: int,
                 applied_state: Callable[[], tuple[MetadataImage, int]]) -> None:
        self.node_id = node_id
        self.driver = driver
        self.max_bytes = max_bytes
        self.interval_ms = interval_ms
        self._applied_state = applied_state
        self._bytes_since_snapshot = 0  # record bytes applied since the image last snapshotted
        self._last_snapshot_at = time.monotonic()
        self._task: asyncio.Task[None] | None = None
        self._closing = False  # no new snapshot tasks once stopping

    def count_applied(self, record_bytes: int) -> None:
        """``record_bytes`` more bytes of records were applied to the image."""
        self._bytes_since_snapshot += record_bytes

    def restored(self) -> None:
        """The image was just restored from a snapshot (this node's own at start-up, or the
        leader's): the state is a snapshot's again."""
        self._bytes_since_snapshot = 0
        self._last_snapshot_at = time.monotonic()

    def _due(self) -> bool:
        if self._bytes_since_snapshot <= 0:
            return False  # nothing applied since the last one
        if self._bytes_since_snapshot >= self.max_bytes:
            return True
        elapsed_ms = (time.monotonic() - self._last_snapshot_at) * 1000
        return 0 < self.interval_ms <= elapsed_ms

    def maybe_start(self) -> None:
        """Start a snapshot if one is due and none is being written."""
        if self._closing or self._task is not None or not self._due() or not self.driver.running:
            return
        # The image holds exactly the entries below the applied offset: the controller sets both
        # together with no await between, so this pair is a consistent state.
        image, end_offset = self._applied_state()
        self._bytes_since_snapshot = 0
        self._last_snapshot_at = time.monotonic()
        self._task = asyncio.get_running_loop().create_task(
            self._write(image, end_offset), name="controller-snapshot")

    async def _write(self, image: MetadataImage, end_offset: int) -> None:
        try:
            # Encoding a large image takes a while: off the event loop (the image is immutable).
            data = await asyncio.get_running_loop().run_in_executor(
                None, lambda: codec.encode_records(image_to_records(image)))
            if not self.driver.running:
                return
            # None: a newer snapshot exists already (one installed from the leader meanwhile).
            snap = self.driver.take_snapshot(end_offset, data)
            if snap is not None:
                log.debug("node %d: metadata snapshot at offset %d (%d bytes)", self.node_id, end_offset, len(data))
        except RaftError as exc:
            log.warning("node %d: no metadata snapshot at offset %d: %s", self.node_id, end_offset, exc)
        except Exception:
            log.exception("node %d: metadata snapshot at offset %d failed", self.node_id, end_offset)
        finally:
            self._task = None
        # Records applied while this one was written may have made the next one due already.
        self.maybe_start()

    async def run_timer(self) -> None:
        """The time trigger (``metadata.log.max.snapshot.interval.ms``) when no entries arrive."""
        period = min(SNAPSHOT_CHECK_MAX_S, self.interval_ms / 1000)
        while True:
            await asyncio.sleep(period)
            self.maybe_start()

    def close(self) -> asyncio.Task[None] | None:
        """Start no more snapshots; the one being written, if any, for the caller to cancel."""
        self._closing = True
        task, self._task = self._task, None
        return task


__all__ = ["SnapshotScheduler"]
