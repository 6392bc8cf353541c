"""CPU time and resident memory of broker process trees, from /proc.

:class:`Meter` samples the brokers around a workload's measured phase (every workload reports its
brokers' CPU-seconds and resident memory); :func:`idle_cpu_percent` is W8's idle window."""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
MIB = 1 << 20
GB = 10**9  # per GB as in MB/s elsewhere in the harness: 10^9 bytes
SAMPLE_S = 0.5  # one sample reads a few /proc files per broker thread: cheap at this interval

# (pid, start time in clock ticks): a pid alone could be reused by a later process.
ProcessKey = tuple[int, int]


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def process_tree(pid: int) -> list[int]:
    """The process and its descendants (a broker may run helpers; all of them count)."""
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo += _children(current)
    return tree


def _stat(pid: int) -> tuple[ProcessKey, float] | None:
    """(identity, utime + stime in seconds) from /proc/<pid>/stat, or None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces; fields after its closing ')' are fixed:
    # utime and stime are fields 14 and 15, the start time field 22.
    fields = stat.rsplit(")", 1)[1].split()
    return (pid, int(fields[19])), (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def cpu_seconds(pid: int) -> float:
    """utime + stime of the tree."""
    return sum(s[1] for s in map(_stat, process_tree(pid)) if s is not None)


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def rss_bytes(pid: int) -> int:
    return sum(_rss(p) for p in process_tree(pid))


def idle_cpu_percent(pid: int, window_s: float) -> float:
    """CPU used over ``window_s`` of wall time, in percent of one core."""
    before, start = cpu_seconds(pid), time.monotonic()
    time.sleep(window_s)
    return 100.0 * (cpu_seconds(pid) - before) / (time.monotonic() - start)


class Meter:
    """Broker CPU-seconds and resident memory over a phase, sampled in a background thread.

    ``pids`` is asked at every sample for the brokers' root processes, so a broker that starts
    (W7) or is killed (W6) during the phase is followed: each process's CPU time is its last
    sampled value minus its value when the phase began (zero for a process that began later),
    so the CPU of a process killed mid-phase is kept up to its last sample. RSS is the sum over
    every process of every tree at one sample (three brokers: the cluster's total)."""

    def __init__(self, pids: Callable[[], Iterable[int | None]], interval: float = SAMPLE_S) -> None:
        self._pids = pids
        self._interval = interval
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="resource-meter", daemon=True)
        self._base: dict[ProcessKey, float] = {}
        self._last: dict[ProcessKey, float] = {}
        self._lap_at = 0.0
        self.rss_samples: list[int] = []

    def __enter__(self) -> Meter:
        self._sample()
        with self._lock:
            self._base = dict(self._last)
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()
        # A last sample at the end of the phase: its CPU counts to the very end.
        self._sample()

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self._sample()

    def _sample(self) -> None:
        total_rss = 0
        seen: dict[ProcessKey, float] = {}
        for root in self._pids():
            if root is None:
                continue
            for pid in process_tree(root):
                stat = _stat(pid)
                if stat is not None:
                    seen[stat[0]] = stat[1]
                    total_rss += _rss(pid)
        with self._lock:
            self._last.update(seen)
            if seen:
                self.rss_samples.append(total_rss)

    def cpu_seconds(self) -> float:
        """CPU-seconds of every broker process since the phase began (up to the latest sample)."""
        with self._lock:
            return sum(cpu - self._base.get(key, 0.0) for key, cpu in self._last.items())

    def lap(self) -> float:
        """CPU-seconds since the previous lap (or the start): one phase of several (W1's two
        producers). Samples first, so the lap ends now."""
        self._sample()
        now = self.cpu_seconds()
        lap, self._lap_at = now - self._lap_at, now
        return lap

    def rss_values(self) -> dict[str, float]:
        samples = self.rss_samples or [0]
        return {"rss_peak_mib": max(samples) / MIB, "rss_median_mib": statistics.median(samples) / MIB}

    def values(self, moved_bytes: int | None, cpu_s: float | None = None) -> dict[str, float]:
        """The values every workload reports: CPU per GB moved (or CPU-seconds where the workload
        moves no bytes) and RSS. ``cpu_s`` overrides the whole phase's CPU (one lap)."""
        cpu = self.cpu_seconds() if cpu_s is None else cpu_s
        if moved_bytes is None:
            return {"cpu_s": cpu, **self.rss_values()}
        return {"cpu_s_per_gb": per_gb(cpu, moved_bytes), "cpu_s": cpu, **self.rss_values()}


def per_gb(cpu_s: float, moved_bytes: int) -> float:
    return cpu_s / (moved_bytes / GB) if moved_bytes > 0 else 0.0
