"""One transactional id's metadata and the transitions Kafka allows between its states.

A transition is two steps, as in Kafka's ``TransactionMetadata``: ``prepare_*`` checks it and
returns the :class:`TxnTransit` to write to ``__transaction_state`` (and marks the metadata
*pending*, so no other transition starts meanwhile); once the record is durable,
:meth:`TxnMetadata.complete` applies it, or :meth:`TxnMetadata.cancel_pending` forgets it if the
write failed. PrepareEpochFence is never written: it only bumps the epoch in memory on the way
to PrepareAbort.

``client_transaction_version`` is kept (and written): 2 for a transaction of a transaction
version 2 client (KIP-890 part 2), whose end bumps the epoch (:meth:`TxnMetadata.prepare_abort_or_commit`)
and, at an exhausted epoch, moves to the next producer id at Complete*.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import IntEnum

from ..protocol.errors import ErrorCode, KafkaError

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_PRODUCER_EPOCH = 32767  # Java's Short.MAX_VALUE

TopicPartition = tuple[str, int]


class TxnState(IntEnum):
    """Kafka's ``TransactionState``; the value is the id written in ``TransactionStatus``."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def label(self) -> str:
        """The name DescribeTransactions and ListTransactions show (and filter by)."""
        return _LABELS[self]

    @classmethod
    def from_label(cls, label: str) -> TxnState | None:
        return _BY_LABEL.get(label)


_LABELS = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_LABEL = {label: state for state, label in _LABELS.items()}

S = TxnState
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    # Empty and Complete* only for transaction version 2 (an abort the client is unsure of).
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}
# States in which an idle transactional id may expire (transactional.id.expiration.ms).
EXPIRATION_ALLOWED = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})


def epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps the last epoch free so the coordinator can always fence a producer."""
    return epoch >= MAX_PRODUCER_EPOCH - 1


@dataclass(frozen=True)
class TxnTransit:
    """A transactional id's metadata as one transition leaves it: what is written to the log."""

    producer_id: int
    prev_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    start_ms: int
    last_update_ms: int
    client_transaction_version: int = 0


class TxnMetadata:
    def __init__(self, transactional_id: str, producer_id: int, *, prev_producer_id: int = NO_PRODUCER_ID,
                 next_producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                 last_producer_epoch: int = NO_PRODUCER_EPOCH, timeout_ms: int = 60_000,
                 state: TxnState = S.EMPTY, partitions: frozenset[TopicPartition] = frozenset(),
                 start_ms: int = -1, last_update_ms: int = -1, client_transaction_version: int = 0) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.prev_producer_id = prev_producer_id
        self.next_producer_id = next_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.timeout_ms = timeout_ms
        self.state = state
        self.partitions = partitions
        self.start_ms = start_ms
        self.last_update_ms = last_update_ms
        self.client_transaction_version = client_transaction_version
        # The state a prepared transition goes to, until its record is written (or fails).
        self.pending: TxnState | None = None
        # An epoch fence whose write failed already bumped the epoch once: do not bump again.
        self.failed_epoch_fence = False

    @classmethod
    def from_transit(cls, transactional_id: str, t: TxnTransit) -> TxnMetadata:
        """Metadata read back from the log (the last epoch is not stored: Kafka leaves it -1)."""
        return cls(transactional_id, t.producer_id, prev_producer_id=t.prev_producer_id,
                   next_producer_id=t.next_producer_id, producer_epoch=t.producer_epoch,
                   timeout_ms=t.timeout_ms, state=t.state, partitions=t.partitions, start_ms=t.start_ms,
                   last_update_ms=t.last_update_ms, client_transaction_version=t.client_transaction_version)

    def __repr__(self) -> str:
        return (f"TxnMetadata({self.transactional_id!r}, pid={self.producer_id}, epoch={self.producer_epoch}, "
                f"state={self.state.label}, pending={self.pending.label if self.pending else None}, "
                f"partitions={sorted(self.partitions)})")

    @property
    def pending_transition(self) -> bool:
        return self.pending is not None

    def current(self) -> TxnTransit:
        return TxnTransit(self.producer_id, self.prev_producer_id, self.next_producer_id, self.producer_epoch,
                          self.last_producer_epoch, self.timeout_ms, self.state, self.partitions, self.start_ms,
                          self.last_update_ms, self.client_transaction_version)

    # Preparing transitions ---------------------------------------------------------------

    def _prepare(self, transit: TxnTransit) -> TxnTransit:
        if self.pending is not None:
            raise IllegalTransition(f"{self}: preparing {transit.state.label} while {self.pending.label} is pending")
        if transit.producer_id < 0:
            raise IllegalTransition(f"{self}: illegal producer id {transit.producer_id}")
        if transit.state != S.DEAD and transit.producer_epoch < 0:
            raise IllegalTransition(f"{self}: illegal producer epoch {transit.producer_epoch}")
        if self.state not in VALID_PREVIOUS[transit.state]:
            raise IllegalTransition(f"{self}: {transit.state.label} may not follow {self.state.label}")
        self.pending = transit.state
        # Every transition records the producer id it leaves as the previous one (as Kafka does).
        return replace(transit, prev_producer_id=self.producer_id)

    def prepare_fence_epoch(self) -> TxnTransit:
        """Bump the epoch in memory (never written) to fence the producer of an open transaction."""
        bumped = self.producer_epoch if self.failed_epoch_fence or self.producer_epoch >= MAX_PRODUCER_EPOCH \
            else self.producer_epoch + 1
        return self._prepare(replace(self.current(), state=S.PREPARE_EPOCH_FENCE, producer_epoch=bumped))

    def prepare_increment_epoch(self, timeout_ms: int, expected_epoch: int | None, now_ms: int) -> TxnTransit:
        """InitProducerId: the next epoch of the current producer id.

        ``expected_epoch`` is the epoch a KIP-360 client says it has: equal to the current one,
        it is a producer recovering (bump, remember the old epoch); equal to the last one, a
        retry of a bump that succeeded (answer the current epoch again); else it is fenced.
        """
        if epoch_exhausted(self.producer_epoch):
            raise IllegalTransition(f"{self}: no producer epochs left")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            raise KafkaError(f"expected epoch {expected_epoch} is neither the current epoch {self.producer_epoch} "
                             f"nor the previous one {self.last_producer_epoch}", ErrorCode.PRODUCER_FENCED)
        return self._prepare(replace(self.current(), state=S.EMPTY, producer_epoch=epoch, last_producer_epoch=last,
                                     timeout_ms=timeout_ms, partitions=frozenset(), start_ms=-1,
                                     last_update_ms=now_ms))

    def prepare_producer_id_rotation(self, new_producer_id: int, timeout_ms: int, now_ms: int,
                                     record_last_epoch: bool) -> TxnTransit:
        """InitProducerId when the epochs of the current producer id are used up: a new id."""
        if self.state in (S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise IllegalTransition(f"{self}: cannot rotate the producer id of an unfinished transaction")
        return self._prepare(replace(
            self.current(), state=S.EMPTY, producer_id=new_producer_id, producer_epoch=0,
            last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            timeout_ms=timeout_ms, partitions=frozenset(), start_ms=-1, last_update_ms=now_ms))

    def prepare_add_partitions(self, added: frozenset[TopicPartition], now_ms: int,
                               client_transaction_version: int) -> TxnTransit:
        starting = self.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
        return self._prepare(replace(
            self.current(), state=S.ONGOING, partitions=self.partitions | added,
            start_ms=now_ms if starting else self.start_ms, last_update_ms=now_ms,
            client_transaction_version=client_transaction_version))

    def prepare_abort_or_commit(self, state: TxnState, now_ms: int, client_transaction_version: int,
                                next_producer_id: int = NO_PRODUCER_ID, no_partition_added: bool = False) -> TxnTransit:
        epoch, last = self.producer_epoch, self.last_producer_epoch
        if client_transaction_version >= 2:  # KIP-890 part 2: the end of a transaction bumps the epoch
            if not (self.producer_epoch == MAX_PRODUCER_EPOCH and state == S.PREPARE_ABORT):
                epoch = self.producer_epoch + 1
            last = self.producer_epoch
        return self._prepare(replace(
            self.current(), state=state, producer_epoch=epoch, last_producer_epoch=last,
            start_ms=now_ms if no_partition_added else self.start_ms, next_producer_id=next_producer_id,
            last_update_ms=now_ms, client_transaction_version=client_transaction_version))

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        """Every partition has its marker: CompleteCommit or CompleteAbort."""
        self.failed_epoch_fence = False
        state = S.COMPLETE_COMMIT if self.state == S.PREPARE_COMMIT else S.COMPLETE_ABORT
        producer_id, epoch = self.producer_id, self.producer_epoch
        if self.client_transaction_version >= 2 and self.next_producer_id != NO_PRODUCER_ID:
            producer_id, epoch = self.next_producer_id, 0  # the epoch overflowed: a new id takes over
        return self._prepare(replace(self.current(), state=state, producer_id=producer_id, producer_epoch=epoch,
                                     next_producer_id=NO_PRODUCER_ID, partitions=frozenset(),
                                     last_update_ms=now_ms))

    def prepare_dead(self) -> TxnTransit:
        """The id expired: its tombstone is written, then it is forgotten."""
        return self._prepare(replace(self.current(), state=S.DEAD, partitions=frozenset()))

    # Finishing transitions ---------------------------------------------------------------

    def complete(self, transit: TxnTransit) -> None:
        """The transit's record is durable: apply it (Kafka's sanity checks, then the values)."""
        to = self.pending
        if to is None or to != transit.state:
            raise IllegalTransition(f"{self}: completing {transit.state.label} without it pending")
        if to == S.EMPTY:
            bumped = transit.producer_epoch == self.producer_epoch + 1 or (
                transit.producer_epoch == 0 and transit.producer_id != self.producer_id)
            ok = (transit.producer_epoch == self.producer_epoch or bumped) and not transit.partitions \
                and transit.start_ms == -1
        elif to == S.ONGOING:
            ok = self._same_producer(transit) and transit.partitions >= self.partitions \
                and transit.timeout_ms == self.timeout_ms
        elif to in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            ok = self._same_producer(transit) and transit.partitions == self.partitions \
                and transit.timeout_ms == self.timeout_ms
        elif to in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            ok = self._same_producer(transit) and transit.timeout_ms == self.timeout_ms and transit.start_ms != -1
        else:  # PrepareEpochFence and Dead are never completed this way
            ok = False
        if not ok:
            raise IllegalTransition(f"{self}: unexpected transition to {transit}")
        self.producer_id = transit.producer_id
        self.prev_producer_id = transit.prev_producer_id
        self.next_producer_id = transit.next_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.timeout_ms = transit.timeout_ms
        self.partitions = transit.partitions
        self.start_ms = transit.start_ms
        self.last_update_ms = transit.last_update_ms
        self.client_transaction_version = transit.client_transaction_version
        self.pending = None
        self.state = to

    def _same_producer(self, t: TxnTransit) -> bool:
        v2 = t.client_transaction_version >= 2
        if v2 and t.state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and t.producer_epoch == 0:
            return t.last_producer_epoch == self.last_producer_epoch and t.prev_producer_id == self.producer_id
        if v2 and t.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return t.last_producer_epoch == self.producer_epoch and t.producer_id == self.producer_id
        return t.producer_epoch == self.producer_epoch and t.producer_id == self.producer_id

    def cancel_pending(self) -> None:
        """The prepared transition's write failed: the metadata stays as it was."""
        self.pending = None


class IllegalTransition(Exception):
    """A transition Kafka's coordinator treats as a bug (it logs it as fatal)."""
