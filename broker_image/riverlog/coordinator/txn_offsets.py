"""Offsets committed inside transactions that are still open (TxnOffsetCommit, KIP-98/447).

A transactional offset commit is written to ``__consumer_offsets`` in a transactional batch of
the producer; it stays *pending* here, invisible to OffsetFetch, until the transaction's
marker reaches the partition: a commit marker makes the producer's pending offsets the
committed ones, an abort marker drops them. Besides the offsets by producer id, an index by
(group, topic, partition) says which producers hold pending offsets there, which is what
OffsetFetch ``require_stable``, offset expiry and group deletion ask about.
"""

from __future__ import annotations

from collections.abc import Iterator

from .offsets import OffsetAndMetadata, OffsetStore

NO_PRODUCER_ID = -1

TopicPartition = tuple[str, int]


class PendingTxnOffsets:
    def __init__(self) -> None:
        self._by_producer: dict[int, OffsetStore] = {}
        # group -> (topic, partition) -> producer ids with a pending offset there; never empty sets.
        self._open: dict[str, dict[TopicPartition, set[int]]] = {}

    def put(self, producer_id: int, group: str, topic: str, partition: int, value: OffsetAndMetadata) -> None:
        self._by_producer.setdefault(producer_id, OffsetStore()).put(group, topic, partition, value)
        self._open.setdefault(group, {}).setdefault((topic, partition), set()).add(producer_id)

    def get(self, producer_id: int, group: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        store = self._by_producer.get(producer_id)
        return None if store is None else store.get(group, topic, partition)

    def complete(self, producer_id: int) -> OffsetStore | None:
        """The transaction of ``producer_id`` ended: forget and return its pending offsets."""
        store = self._by_producer.pop(producer_id, None)
        if store is None:
            return None
        for group, topic, partition, _ in store.all_entries():
            self._unindex(group, topic, partition, producer_id)
        return store

    def remove_partition(self, group: str, topic: str, partition: int) -> None:
        """A tombstone for the offset: every producer's pending offset there goes too (Kafka)."""
        producers = self._open.get(group, {}).get((topic, partition))
        if not producers:
            return
        for producer_id in list(producers):
            store = self._by_producer.get(producer_id)
            if store is not None:
                store.remove(group, topic, partition)
                if not len(store):
                    # Keep nothing for the producer; its marker will find nothing to complete.
                    del self._by_producer[producer_id]
            self._unindex(group, topic, partition, producer_id)

    def _unindex(self, group: str, topic: str, partition: int, producer_id: int) -> None:
        partitions = self._open.get(group)
        if partitions is None:
            return
        producers = partitions.get((topic, partition))
        if producers is None:
            return
        producers.discard(producer_id)
        if not producers:
            del partitions[(topic, partition)]
            if not partitions:
                del self._open[group]

    # Questions ---------------------------------------------------------------------------

    def has_pending(self, group: str, topic: str, partition: int) -> bool:
        return (topic, partition) in self._open.get(group, {})

    def has_group(self, group: str) -> bool:
        return group in self._open

    def partitions(self, group: str) -> list[TopicPartition]:
        """(topic, partition) pairs of the group that have pending offsets."""
        return list(self._open.get(group, {}))

    def producers(self) -> list[int]:
        return list(self._by_producer)

    def all_entries(self) -> Iterator[tuple[int, str, str, int, OffsetAndMetadata]]:
        """(producer id, group, topic, partition, offset) of every pending offset."""
        for producer_id, store in list(self._by_producer.items()):
            for group, topic, partition, value in store.all_entries():
                yield producer_id, group, topic, partition, value

    def __len__(self) -> int:
        return sum(len(store) for store in self._by_producer.values())
