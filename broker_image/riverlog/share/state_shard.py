"""The share coordinator's state machine for one ``__share_group_state`` partition: the durable
state of every share-partition whose key hashes to it.

A share-partition's state is what its leader needs to carry on after a move: the state epoch
(moved on by InitializeShareGroupState, when the group's offsets are reset), the leader epoch of
the last writer, the start offset (SPSO) and the in-flight batches with their delivery states
and counts. The leader writes it (WriteShareGroupState) after acknowledgements and reads it
(ReadShareGroupState) when it becomes the partition's leader. A write from a stale leader or for
an older state epoch is fenced (FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH), as in Kafka.

Pure: each operation returns a :class:`Decision` -- the records to append and the answer to
give once they are durable. Records are applied by :meth:`ShareStateShard.replay`, the path
loading uses too, right when decided.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..protocol.errors import ErrorCode
from .partition import StateBatch
from .state_records import ShareSnapshot, ShareStateKey, ShareStateRecord, ShareUpdate

NO_START_OFFSET = -1  # a share-partition without state (Kafka's uninitialized start offset)


@dataclass
class ShareState:
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...] = ()
    snapshot_epoch: int = 0
    delivery_complete_count: int = -1
    create_timestamp: int = 0


@dataclass
class Decision:
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    records: list[ShareStateRecord] = field(default_factory=list)


def _merge(base: tuple[StateBatch, ...], update: tuple[StateBatch, ...], start: int) -> tuple[StateBatch, ...]:
    """A ShareUpdate's batches over the snapshot's: ranges it names replace the old ones, and
    nothing below the start offset is kept."""
    per_offset: dict[int, StateBatch] = {}
    for batch in (*base, *update):
        for offset in range(max(batch.first_offset, start), batch.last_offset + 1):
            per_offset[offset] = StateBatch(offset, offset, batch.delivery_state, batch.delivery_count)
    out: list[StateBatch] = []
    for offset in sorted(per_offset):
        b = per_offset[offset]
        last = out[-1] if out else None
        if (last is not None and last.last_offset == offset - 1 and last.delivery_state == b.delivery_state
                and last.delivery_count == b.delivery_count):
            out[-1] = StateBatch(last.first_offset, offset, b.delivery_state, b.delivery_count)
        else:
            out.append(b)
    return tuple(out)


class ShareStateShard:
    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.states: dict[ShareStateKey, ShareState] = {}

    # Loading and live changes ------------------------------------------------------------

    def replay(self, record: ShareStateRecord) -> None:
        value = record.value
        if value is None:
            self.states.pop(record.key, None)
        elif isinstance(value, ShareSnapshot):
            self.states[record.key] = ShareState(value.state_epoch, value.leader_epoch, value.start_offset,
                                                 value.state_batches, value.snapshot_epoch,
                                                 value.delivery_complete_count, value.create_timestamp)
        else:
            assert isinstance(value, ShareUpdate)
            state = self.states.get(record.key)
            if state is None:
                return  # an update without its snapshot (compacted away with a deletion)
            state.leader_epoch = value.leader_epoch
            state.start_offset = value.start_offset
            state.batches = _merge(state.batches, value.state_batches, value.start_offset)
            state.delivery_complete_count = value.delivery_complete_count

    def _snapshot(self, key: ShareStateKey, state: ShareState, now_ms: int) -> Decision:
        record = ShareStateRecord(key, ShareSnapshot(
            state.snapshot_epoch, state.state_epoch, state.leader_epoch, state.start_offset, state.batches,
            state.delivery_complete_count, state.create_timestamp or now_ms, now_ms))
        self.replay(record)
        return Decision(records=[record])

    # Operations ---------------------------------------------------------------------------

    def initialize(self, key: ShareStateKey, state_epoch: int, start_offset: int, now_ms: int) -> Decision:
        current = self.states.get(key)
        if current is not None and state_epoch <= current.state_epoch:
            return Decision(ErrorCode.FENCED_STATE_EPOCH, f"State epoch {state_epoch} is not newer than "
                                                          f"{current.state_epoch}.")
        snapshot_epoch = current.snapshot_epoch + 1 if current is not None else 0
        return self._snapshot(key, ShareState(state_epoch, -1, start_offset, (), snapshot_epoch), now_ms)

    def write(self, key: ShareStateKey, state_epoch: int, leader_epoch: int, start_offset: int,
              batches: tuple[StateBatch, ...], delivery_complete_count: int, now_ms: int) -> Decision:
        current = self.states.get(key)
        if current is not None:
            if state_epoch < current.state_epoch:
                return Decision(ErrorCode.FENCED_STATE_EPOCH, f"State epoch {state_epoch} is older than "
                                                              f"{current.state_epoch}.")
            if leader_epoch < current.leader_epoch:
                return Decision(ErrorCode.FENCED_LEADER_EPOCH, f"Leader epoch {leader_epoch} is older than "
                                                               f"{current.leader_epoch}.")
        snapshot_epoch = current.snapshot_epoch + 1 if current is not None else 0
        created = current.create_timestamp if current is not None else now_ms
        state = ShareState(state_epoch, leader_epoch, start_offset, tuple(batches), snapshot_epoch,
                           delivery_complete_count, created)
        return self._snapshot(key, state, now_ms)

    def read(self, key: ShareStateKey, leader_epoch: int) -> tuple[ErrorCode, ShareState | None]:
        """The state a new leader starts from (None: never written); a leader older than the last
        writer is fenced. Leader epoch -1 reads without fencing (an admin's summary)."""
        current = self.states.get(key)
        if current is not None and 0 <= leader_epoch < current.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH, None
        return ErrorCode.NONE, current

    def delete(self, key: ShareStateKey) -> Decision:
        if key not in self.states:
            return Decision()
        record = ShareStateRecord(key, None)
        self.replay(record)
        return Decision(records=[record])
