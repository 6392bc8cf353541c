"""A stand-in for the replica manager under a coordinator's shell in unit tests: the partitions
of one internal topic, each a real log in a directory, led by this node."""

from __future__ import annotations

import uuid
from pathlib import Path

from riverlog.cluster.partition import Partition
from riverlog.storage import Log, LogConfig


class FakeReplicas:
    def __init__(self, directory: Path, topic: str, topic_id: uuid.UUID, partitions: int, node: int) -> None:
        self.partitions: dict[tuple[str, int], Partition] = {}
        for index in range(partitions):
            log = Log.open(directory / f"{topic}-{index}", LogConfig(cleanup_policy="compact"), now_ms=0)
            partition = Partition(topic, index, topic_id, log, node)
            partition.become_leader(0, (node,), (node,))
            self.partitions[(topic, index)] = partition

    def get(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def close(self) -> None:
        for p in self.partitions.values():
            p.log.close()
