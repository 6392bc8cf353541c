"""The partition's small state file and its clean-shutdown marker.

Kafka keeps log start offsets, recovery points and high watermarks in per-log-directory files
shared by all partitions; we keep one small file per partition directory instead, so a partition
stays self-contained (moving or deleting it is one directory operation).

``partition-state.checkpoint`` (text, replaced atomically)::

    0
    log_start_offset <n>
    recovery_point <n>
    high_watermark <n>

``recovery_point``: every byte below this offset was fsynced, so a restart after a crash only
validates segments from the one containing it onward.

``cleaner-offset-checkpoint`` (text, replaced atomically; only in compacted logs)::

    0
    clean_offset <n>
    delete_horizon <ms, or -1>

``clean_offset``: everything below it has been compacted (the log cleaner's "first dirty
offset"). ``delete_horizon``: the earliest time at which a kept tombstone may be removed, so the
cleaner knows to run again then even if little new data arrived.

``.riverlog-clean-shutdown``: written last by a clean close, removed by open before anything else
is written; present at open means the files are complete and the indexes can be trusted.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .files import atomic_write, fsync_dir, fsync_path

STATE_NAME = "partition-state.checkpoint"
CLEANER_NAME = "cleaner-offset-checkpoint"
NO_HORIZON = -1
CLEAN_SHUTDOWN_NAME = ".riverlog-clean-shutdown"


@dataclass(frozen=True, slots=True)
class PartitionState:
    log_start_offset: int
    recovery_point: int
    high_watermark: int


def _read_fields(path: Path) -> dict[str, int] | None:
    """A version-0 checkpoint: a "0" line, then "key value" lines; None if missing or damaged."""
    try:
        lines = path.read_text().split("\n")
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    values: dict[str, int] = {}
    try:
        if lines[0].strip() != "0":
            return None
        for line in lines[1:]:
            if line.strip():
                key, value = line.split()
                values[key] = int(value)
    except ValueError:
        return None
    return values


def _write_fields(path: Path, fields: dict[str, int], *, sync: bool) -> None:
    text = "0\n" + "".join(f"{key} {value}\n" for key, value in fields.items())
    atomic_write(path, text.encode(), sync=sync)


def read_state(directory: Path) -> PartitionState | None:
    values = _read_fields(directory / STATE_NAME)
    try:
        return None if values is None else PartitionState(
            values["log_start_offset"], values["recovery_point"], values["high_watermark"])
    except KeyError:
        return None


def write_state(directory: Path, state: PartitionState, *, sync: bool) -> None:
    _write_fields(directory / STATE_NAME, {"log_start_offset": state.log_start_offset,
                                           "recovery_point": state.recovery_point,
                                           "high_watermark": state.high_watermark}, sync=sync)


@dataclass(frozen=True, slots=True)
class CleanerState:
    clean_offset: int
    delete_horizon: int = NO_HORIZON


def read_cleaner_state(directory: Path) -> CleanerState | None:
    values = _read_fields(directory / CLEANER_NAME)
    try:
        return None if values is None else CleanerState(
            values["clean_offset"], values.get("delete_horizon", NO_HORIZON))
    except KeyError:
        return None


def write_cleaner_state(directory: Path, state: CleanerState, *, sync: bool = True) -> None:
    _write_fields(directory / CLEANER_NAME, {"clean_offset": state.clean_offset,
                                             "delete_horizon": state.delete_horizon}, sync=sync)


def truncate_cleaner_state(directory: Path, end_offset: int) -> None:
    """The log was truncated to ``end_offset``: data appended there later is dirty again."""
    state = read_cleaner_state(directory)
    if state is not None and state.clean_offset > end_offset:
        # Not fsynced: truncation runs on the event loop. A stale (too high) clean offset is safe:
        # records it wrongly calls clean only miss deduplication against each other, they never
        # cause another record's removal (only the dirty section's keys do).
        write_cleaner_state(directory, CleanerState(end_offset, state.delete_horizon), sync=False)


def sync_state(directory: Path) -> None:
    fsync_path(directory / STATE_NAME)
    fsync_dir(directory)


def has_clean_shutdown(directory: Path) -> bool:
    return (directory / CLEAN_SHUTDOWN_NAME).exists()


def mark_clean_shutdown(directory: Path) -> None:
    atomic_write(directory / CLEAN_SHUTDOWN_NAME, b"", sync=True)


def clear_clean_shutdown(directory: Path) -> None:
    path = directory / CLEAN_SHUTDOWN_NAME
    if path.exists():
        path.unlink()
        fsync_dir(directory)
