"""The log cleaner's scheduler: which compacted log to clean next, and where the work runs.

As in Kafka, each of ``log.cleaner.threads`` workers repeatedly takes the dirtiest compacted log
that nobody is cleaning and whose dirty ratio exceeds its ``min.cleanable.dirty.ratio`` (or that
must be cleaned now: ``max.compaction.lag.ms`` passed, or kept tombstones reached their delete
horizon), and runs one pass of ``storage/cleaner.py`` on it. A worker that found nothing to do
sleeps ``log.cleaner.backoff.ms``. Choosing and cleaning run in the cleaner's own thread pool, so
a long pass never occupies the event loop nor the default executor that flushes use.

A log whose pass failed (an I/O error, a corrupt batch) is left alone until the broker restarts,
Kafka's "uncleanable partition": retrying would fail the same way and hide the first error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge

from ..config import BrokerConfig
from ..storage import Log
from ..storage.cleaner import CleanableRange, CleanAborted, CompactionSettings, clean, cleanable_range

if TYPE_CHECKING:
    from .replica_manager import ReplicaManager

log = logging.getLogger(__name__)


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class _Candidate:
    name: str  # topic-partition, for logs and metrics
    log: Log
    settings: CompactionSettings


class LogCleaner:
    def __init__(
        self,
        config: BrokerConfig,
        replicas: ReplicaManager,
        registry: CollectorRegistry | None = None,
        *,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.config = config
        self.replicas = replicas
        self._clock = clock
        self.enabled = config.get_bool("log.cleaner.enable")
        self.threads = max(1, config.get_int("log.cleaner.threads"))
        self.backoff_s = config.get_int("log.cleaner.backoff.ms") / 1000
        self.dedupe_buffer_size = config.get_int("log.cleaner.dedupe.buffer.size")
        self._executor: ThreadPoolExecutor | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._abort = threading.Event()
        self._claim = threading.Lock()  # guards _in_progress and _uncleanable across workers
        self._in_progress: set[Path] = set()
        self._uncleanable: set[Path] = set()
        r = registry if registry is not None else CollectorRegistry()
        self.cleaned_bytes = Counter("riverlog_log_cleaner_cleaned_bytes",
                                     "Bytes of segments read and recopied by compaction passes", registry=r)
        self.written_bytes = Counter("riverlog_log_cleaner_written_bytes",
                                     "Bytes of cleaned segments written by compaction passes", registry=r)
        self.passes = Counter("riverlog_log_cleaner_passes", "Compaction passes by outcome", ["result"],
                              registry=r)
        self.last_duration = Gauge("riverlog_log_cleaner_last_duration_seconds",
                                   "Duration of the last completed compaction pass", registry=r)
        self.max_dirty_ratio = Gauge("riverlog_log_cleaner_max_dirty_ratio",
                                     "Highest dirty ratio among compacted logs at the last check", registry=r)
        self.uncleanable = Gauge("riverlog_log_cleaner_uncleanable_partitions",
                                 "Compacted logs left alone after a failed pass", registry=r)

    # Life cycle --------------------------------------------------------------------------

    def start(self) -> None:
        if not self.enabled or self._tasks:
            return
        self._abort.clear()
        self._executor = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="log-cleaner")
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._worker()) for _ in range(self.threads)]

    async def stop(self) -> None:
        """Abort passes in progress (nothing is swapped half-way) and wait for the threads."""
        self._abort.set()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        if self._executor is not None:
            executor, self._executor = self._executor, None
            await asyncio.get_running_loop().run_in_executor(None, lambda: executor.shutdown(wait=True))

    async def _worker(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._abort.is_set():
            worked = False
            try:
                candidates = self.candidates()
                if candidates and self._executor is not None:
                    worked = await loop.run_in_executor(self._executor, self.clean_filthiest, candidates)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("log cleaner: choosing a log to clean failed")
            if not worked:
                await asyncio.sleep(self.backoff_s)

    # Choosing (event loop) ---------------------------------------------------------------

    def candidates(self) -> list[_Candidate]:
        """Compacted logs hosted here with their compaction settings (from each log's config,
        which the replica manager keeps in step with the topic's configs).

        Runs on the event loop: the partition map belongs to it."""
        out: list[_Candidate] = []
        for (topic, index), partition in list(self.replicas.partitions.items()):
            log_obj = partition.log
            if log_obj.closed or not log_obj.config.compacts:
                continue
            out.append(_Candidate(f"{topic}-{index}", log_obj, CompactionSettings.of(log_obj.config)))
        return out

    # Cleaning (cleaner thread) -----------------------------------------------------------

    def clean_filthiest(self, candidates: list[_Candidate]) -> bool:
        """Clean the dirtiest eligible log once; False if there was none (the worker backs off)."""
        now = self._clock()
        best: tuple[float, _Candidate, CleanableRange] | None = None
        max_ratio = 0.0
        with self._claim:
            for candidate in candidates:
                directory = candidate.log.directory
                if directory in self._in_progress or directory in self._uncleanable:
                    continue
                try:
                    state = cleanable_range(candidate.log, now, candidate.settings)
                except Exception:
                    log.exception("log cleaner: cannot inspect %s", candidate.name)
                    continue
                if state is None:
                    continue
                max_ratio = max(max_ratio, state.dirty_ratio)
                if not state.should_clean(candidate.settings.min_cleanable_dirty_ratio):
                    continue
                # Tombstones due and max.compaction.lag.ms come first; then the dirtiest.
                urgency = 2.0 if state.must_clean or state.delete_horizon_due else state.dirty_ratio
                if best is None or urgency > best[0]:
                    best = (urgency, candidate, state)
            self.max_dirty_ratio.set(max_ratio)
            if best is None:
                return False
            _, chosen, state = best
            self._in_progress.add(chosen.log.directory)
        try:
            stats = clean(chosen.log, now, settings=chosen.settings, dedupe_buffer_size=self.dedupe_buffer_size,
                          abort=self._abort)
        except CleanAborted:
            self.passes.labels(result="aborted").inc()
            return False
        except Exception:
            log.exception("log cleaner: cleaning %s failed; it will not be cleaned again until restart",
                          chosen.name)
            self.passes.labels(result="failed").inc()
            with self._claim:
                self._uncleanable.add(chosen.log.directory)
                self.uncleanable.set(len(self._uncleanable))
            return False
        finally:
            with self._claim:
                self._in_progress.discard(chosen.log.directory)
        if stats is None:
            return False
        self.passes.labels(result="done").inc()
        self.cleaned_bytes.inc(stats.bytes_read)
        self.written_bytes.inc(stats.bytes_written)
        self.last_duration.set(stats.duration_s)
        log.info(
            "cleaned %s: dirty ratio %.2f, %d segments (%d bytes) -> %d (%d bytes), %d of %d records kept, "
            "%d keys, %d aborted batches and %d markers removed, clean to offset %d, in %.3fs",
            chosen.name, state.dirty_ratio, stats.segments_before, stats.bytes_read, stats.segments_after,
            stats.bytes_written, stats.records_kept, stats.records_read, stats.map_keys,
            stats.aborted_batches_removed, stats.markers_removed, stats.clean_offset, stats.duration_s,
        )
        return True
