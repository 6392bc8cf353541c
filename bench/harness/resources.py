"""CPU time and resident memory of a broker process tree, from /proc (W8)."""

from __future__ import annotations

import os
import time
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


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


def cpu_seconds(pid: int) -> float:
    """utime + stime of the tree (fields 14 and 15 of /proc/<pid>/stat, in clock ticks)."""
    total = 0
    for p in process_tree(pid):
        try:
            stat = Path(f"/proc/{p}/stat").read_text()
        except OSError:
            continue
        # The command name (field 2) may hold spaces; fields after its closing ')' are fixed.
        fields = stat.rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / CLOCK_TICKS


def rss_bytes(pid: int) -> int:
    total = 0
    for p in process_tree(pid):
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


def idle_cpu_percent(pid: int, window_s: float) -> float:
    """CPU used over ``window_s`` of wall time, in percent of one core."""
    before, start = cpu_seconds(pid), time.monotonic()
    time.sleep(window_s)
    return 100.0 * (cpu_seconds(pid) - before) / (time.monotonic() - start)
