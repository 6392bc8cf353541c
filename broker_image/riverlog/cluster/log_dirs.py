"""The broker's log directories (``log.dirs``): where partitions live, and which are online.

Kafka's JBOD model. Each directory is meant to be a disk of its own, with a ``meta.properties``
naming the cluster, the node and the directory (``directory.id``). A new partition goes to the
online directory holding the fewest partitions (ties: the order of ``log.dirs``), an existing
one stays where it is found.

A disk error in any log takes its whole directory offline, as Kafka's LogDirFailureChannel does:
the partitions in it answer KAFKA_STORAGE_ERROR until the broker restarts, while partitions in
other directories, the metadata log and the group coordinator (whose offsets partitions may live
elsewhere) carry on. The broker reports offline directories in its heartbeats. A restart, once
the disk is fixed or has room again, recovers the directory as after a crash: nothing that was
acknowledged is lost, because a failed append is never acknowledged and earlier ones are on disk.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

META_FILE = "meta.properties"


@dataclass
class LogDir:
    path: Path
    dir_id: uuid.UUID
    online: bool = True
    error: str = ""  # why it went offline


def _read_properties(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines()
                if "=" in line and not line.startswith("#"))


def prepare_dir(path: Path, cluster_id: str, node_id: int) -> uuid.UUID:
    """Create ``path`` if needed and make its meta.properties name this cluster, node and a
    directory id (kept across restarts). A directory of another cluster or node is refused with
    ValueError: pointing a broker at somebody else's data is a configuration mistake."""
    path.mkdir(parents=True, exist_ok=True)
    meta = path / META_FILE
    props = _read_properties(meta) if meta.exists() else {}
    for key, mine in (("cluster.id", cluster_id), ("node.id", str(node_id))):
        theirs = props.get(key)
        if theirs and theirs != mine:
            raise ValueError(f"{meta} says {key}={theirs}, but this broker has {key}={mine}: "
                             "give this broker its own log directories (or restore the right ones)")
    try:
        return uuid.UUID(props["directory.id"])
    except (KeyError, ValueError):
        pass
    dir_id = uuid.uuid4()
    props.update({"version": props.get("version", "1"), "cluster.id": cluster_id, "node.id": str(node_id),
                  "directory.id": str(dir_id)})
    tmp = meta.with_name(META_FILE + ".tmp")
    tmp.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    os.replace(tmp, meta)
    return dir_id


class LogDirs:
    """The broker's log directories and their state. ``fail`` may be called from any thread (a
    flush thread hits a disk error as easily as the event loop does)."""

    def __init__(self, paths: Sequence[Path], cluster_id: str, node_id: int,
                 on_offline: Callable[[LogDir], None] | None = None) -> None:
        if not paths:
            raise ValueError("log.dirs is empty (example: log.dirs=./data)")
        self._lock = threading.Lock()
        self.on_offline = on_offline
        self.dirs: list[LogDir] = []
        for path in paths:
            path = path.resolve()
            try:
                dir_id = prepare_dir(path, cluster_id, node_id)
            except OSError as exc:
                # Kafka starts with the directories it can use and reports the others offline.
                log.error("log directory %s is offline: it cannot be prepared (%s). Partitions stored "
                          "there are unavailable on this broker; fix the disk, then restart the broker.",
                          path, exc)
                self.dirs.append(LogDir(path, uuid.uuid5(uuid.NAMESPACE_URL, str(path)), False, str(exc)))
                continue
            self.dirs.append(LogDir(path, dir_id))
        if not self.online():
            raise OSError(f"no usable log directory among {', '.join(str(d.path) for d in self.dirs)}: "
                          + "; ".join(f"{d.path}: {d.error}" for d in self.dirs))

    def online(self) -> list[LogDir]:
        return [d for d in self.dirs if d.online]

    def offline_ids(self) -> list[uuid.UUID]:
        return [d.dir_id for d in self.dirs if not d.online]

    def containing(self, partition_dir: Path) -> LogDir | None:
        """The log directory a partition's directory lives in."""
        parent = partition_dir.parent
        return next((d for d in self.dirs if d.path == parent), None)

    def choose(self, load: Mapping[Path, int]) -> LogDir | None:
        """Where a new partition goes: the online directory with the fewest partitions (``load``
        counts them per directory path); None when every directory is offline."""
        candidates = self.online()
        if not candidates:
            return None
        return min(candidates, key=lambda d: load.get(d.path, 0))  # min keeps the first on ties

    def fail(self, d: LogDir, error: str) -> bool:
        """Take ``d`` offline; True if it was online (the caller then handles its partitions)."""
        with self._lock:
            if not d.online:
                return False
            d.online = False
            d.error = error
        remaining = ", ".join(str(x.path) for x in self.online()) or "none"
        log.error("log directory %s is offline after a disk error (%s). Its partitions answer "
                  "KAFKA_STORAGE_ERROR on this broker until it restarts; online log directories: %s. "
                  "Free space or replace the disk, then restart the broker: it recovers the directory.",
                  d.path, error, remaining)
        if self.on_offline is not None:
            self.on_offline(d)
        return True
