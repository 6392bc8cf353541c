"""The transaction state machine of one ``__transaction_state`` partition: every transactional id
that hashes to it, as Kafka's ``TransactionCoordinator`` decides for them.

Pure and single-threaded, like the group coordinator's shards: the asyncio shell
(``runtime.py``) calls an operation with a clock reading and a reply token and gets a
:class:`Result` back: replies to deliver, ``__transaction_state`` records to append, what to run
once they are durable (or failed), and transaction markers to have written to partition leaders.
Usage::

    result = shard.run(now_ms, shard.end_txn, token, "tx-1", producer_id, epoch, True)
    result = shard.complete_write(result.after_write, ErrorCode.NONE, now_ms)
    result = shard.run(now_ms, shard.markers_written, job)   # every leader wrote job's markers

An operation that needs a fresh producer id (a new transactional id, or one whose epochs are
used up) raises :class:`NeedProducerId` before changing anything; the shell allocates one from
the controller and runs the operation again with it.

Transaction version: a client speaking version 2 (KIP-890 part 2: EndTxn version 5, partitions
added by their leaders with AddPartitionsToTxn version 4+) gets an epoch bump at the end of every
transaction (:meth:`TxnShard.end_txn` with ``client_transaction_version=2``); every other
request follows the classic protocol (no bump at a transaction's end). Kafka, too, chooses by the
request's version, not by the cluster's ``transaction.version``.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from ..protocol.errors import ErrorCode, KafkaError
from .config import TxnConfig
from .records import TxnLogRecord
from .state import (
    EXPIRATION_ALLOWED,
    MAX_PRODUCER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    IllegalTransition,
    TopicPartition,
    TxnMetadata,
    TxnState,
    TxnTransit,
    epoch_exhausted,
)

log = logging.getLogger("riverlog.transactions")

S = TxnState
Body = dict[str, Any]
AfterWrite = Callable[[ErrorCode], None]
CLIENT_TRANSACTION_VERSION = 0


class NeedProducerId(Exception):
    """The operation needs a newly allocated producer id; nothing was changed."""


@dataclass(frozen=True)
class MarkerJob:
    """Markers to write for one finished transaction, then the Complete* record to append.

    ``attempt`` counts earlier tries of the final append (a retry waits a little first)."""

    transactional_id: str
    coordinator_epoch: int
    producer_id: int
    producer_epoch: int
    committed: bool
    partitions: frozenset[TopicPartition]
    complete: TxnTransit
    attempt: int = 0
    # When Prepare* was written (the shard's clock; for a transaction found prepared on loading,
    # the time its Prepare* record carries): marker latency is measured from it.
    prepared_ms: int = -1


@dataclass
class Result:
    replies: list[tuple[int, Body]] = field(default_factory=list)
    records: list[TxnLogRecord] = field(default_factory=list)
    # Run with NONE once ``records`` are durable, else with the coordinator-facing error.
    after_write: list[AfterWrite] = field(default_factory=list)
    markers: list[MarkerJob] = field(default_factory=list)
    # (committed, milliseconds from Prepare* written to Complete* written) of the transactions
    # this result completed.
    completed: list[tuple[bool, int]] = field(default_factory=list)


class TxnShard:
    def __init__(self, partition: int, coordinator_epoch: int, config: TxnConfig) -> None:
        self.partition = partition
        self.coordinator_epoch = coordinator_epoch
        self.config = config
        self.txns: dict[str, TxnMetadata] = {}
        self.now_ms = 0
        self._out = Result()

    # Running operations ------------------------------------------------------------------

    def run(self, now_ms: int, operation: Callable[..., Any], *args: Any) -> Result:
        """Run one operation (a bound method of this shard) at ``now_ms``."""
        self.now_ms = max(self.now_ms, now_ms)
        out, self._out = self._out, Result()
        try:
            operation(*args)
            return self._out
        finally:
            self._out = out

    def complete_write(self, callbacks: list[AfterWrite], error: ErrorCode, now_ms: int) -> Result:
        def finish() -> None:
            for callback in callbacks:
                callback(error)

        return self.run(now_ms, finish)

    def _reply(self, token: int | None, body: Body) -> None:
        if token is not None:
            self._out.replies.append((token, body))

    def _write(self, transactional_id: str, transit: TxnTransit | None, after: AfterWrite) -> None:
        self._out.records.append(TxnLogRecord(transactional_id, transit))
        self._out.after_write.append(after)

    # Loading -----------------------------------------------------------------------------

    def replay(self, record: TxnLogRecord) -> None:
        """Apply one record read back from the log: the latest value of an id wins."""
        if record.value is None:
            self.txns.pop(record.transactional_id, None)
        else:
            self.txns[record.transactional_id] = TxnMetadata.from_transit(record.transactional_id, record.value)

    def on_loaded(self) -> None:
        """Transactions the previous coordinator left half-finished get their markers again."""
        for txn in self.txns.values():
            if txn.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                self._send_markers(txn, prepared_ms=txn.last_update_ms)
        if self.txns:
            log.info("%s-%d: %d transactional ids (coordinator epoch %d)", "__transaction_state", self.partition,
                     len(self.txns), self.coordinator_epoch)

    # InitProducerId ----------------------------------------------------------------------

    def init_producer_id(self, token: int, transactional_id: str, timeout_ms: int,
                         expected: tuple[int, int] | None, fresh_producer_id: int | None) -> None:
        """``expected`` is the (producer id, epoch) a KIP-360 client sends, None if it sent -1s."""
        txn = self.txns.get(transactional_id)
        if txn is None:
            if fresh_producer_id is None:
                raise NeedProducerId
            txn = TxnMetadata(transactional_id, fresh_producer_id, timeout_ms=timeout_ms,
                              last_update_ms=self.now_ms)
            self.txns[transactional_id] = txn
            fresh_producer_id = None
        if txn.pending_transition:
            self._reply(token, _init_error(ErrorCode.CONCURRENT_TRANSACTIONS))
            return
        if expected is not None and not _valid_expected_producer(txn, *expected):
            self._reply(token, _init_error(ErrorCode.PRODUCER_FENCED))
            return
        if txn.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            self._reply(token, _init_error(ErrorCode.CONCURRENT_TRANSACTIONS))
            return
        if txn.state == S.ONGOING:
            # Abort what the previous incarnation left open, fencing it with a bumped epoch the
            # client never sees; it retries (CONCURRENT_TRANSACTIONS) and then bumps again.
            fence = txn.prepare_fence_epoch()
            self._end(transactional_id, fence.producer_id, fence.producer_epoch, False, False,
                      lambda error: self._reply(token, _init_error(
                          ErrorCode.CONCURRENT_TRANSACTIONS if error == ErrorCode.NONE else error)))
            return
        if txn.state not in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            raise IllegalTransition(f"{txn}: InitProducerId in state {txn.state.label}")
        try:
            if epoch_exhausted(txn.producer_epoch) and (expected is None or expected[1] == txn.producer_epoch):
                if fresh_producer_id is None:
                    raise NeedProducerId
                transit = txn.prepare_producer_id_rotation(fresh_producer_id, timeout_ms, self.now_ms,
                                                           record_last_epoch=expected is not None)
            else:
                transit = txn.prepare_increment_epoch(timeout_ms, expected[1] if expected else None, self.now_ms)
        except KafkaError as exc:
            self._reply(token, _init_error(exc.code))
            return

        def written(error: ErrorCode) -> None:
            if error != ErrorCode.NONE:
                txn.cancel_pending()
                self._reply(token, _init_error(error))
                return
            txn.complete(transit)
            log.info("transactional id %s: producer id %d, epoch %d (partition %d)", transactional_id,
                     transit.producer_id, transit.producer_epoch, self.partition)
            self._reply(token, {"error_code": ErrorCode.NONE, "producer_id": transit.producer_id,
                                "producer_epoch": transit.producer_epoch})

        self._write(transactional_id, transit, written)

    # AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------

    def _check_producer(self, txn: TxnMetadata | None, producer_id: int, producer_epoch: int) -> ErrorCode:
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if txn.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if txn.pending_transition or txn.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return ErrorCode.NONE

    def add_partitions(self, token: int, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TopicPartition], client_transaction_version: int = 0) -> None:
        """Add partitions to the producer's transaction (starting it if none is open): from the
        client (AddPartitionsToTxn up to version 3, AddOffsetsToTxn), or, for a version 2 client,
        from the leader its records or offsets went to (version 4+, ``verify_only`` false)."""
        txn = self.txns.get(transactional_id)
        added = frozenset(partitions)
        error = self._check_producer(txn, producer_id, producer_epoch)
        if error != ErrorCode.NONE:
            self._reply(token, {"error_code": error})
            return
        assert txn is not None
        if txn.state == S.ONGOING and added <= txn.partitions:
            self._reply(token, {"error_code": ErrorCode.NONE})  # nothing new: no write needed
            return
        transit = txn.prepare_add_partitions(added, self.now_ms, client_transaction_version)

        def written(error: ErrorCode) -> None:
            if error == ErrorCode.NONE:
                txn.complete(transit)
            else:
                txn.cancel_pending()
            self._reply(token, {"error_code": error})

        self._write(transactional_id, transit, written)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn ``verify_only`` (KIP-890 part 1, from a partition leader): are these
        partitions in the producer's open transaction? Reads only. As Kafka, a pending transition
        is not looked at (partitions join the metadata once their add is durable, and the
        leader's guard catches a transaction that ended meanwhile); one being completed
        (Prepare*) is CONCURRENT_TRANSACTIONS, a partition not in it TRANSACTION_ABORTABLE."""
        txn = self.txns.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            error = ErrorCode.INVALID_PRODUCER_ID_MAPPING
        elif txn.producer_epoch != producer_epoch:
            error = ErrorCode.PRODUCER_FENCED
        elif txn.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            error = ErrorCode.CONCURRENT_TRANSACTIONS
        else:
            return {tp: ErrorCode.NONE if tp in txn.partitions else ErrorCode.TRANSACTION_ABORTABLE
                    for tp in partitions}
        return dict.fromkeys(partitions, error)

    # EndTxn ------------------------------------------------------------------------------

    def end_txn(self, token: int, transactional_id: str, producer_id: int, producer_epoch: int,
                committed: bool, client_transaction_version: int = CLIENT_TRANSACTION_VERSION,
                fresh_producer_id: int | None = None) -> None:
        """EndTxn. Version 2 (EndTxn v5) bumps the epoch and answers the producer id and epoch
        the client goes on with; ``fresh_producer_id`` is the one :class:`NeedProducerId` asked
        for when the epochs are used up."""
        if client_transaction_version >= 2:
            self._end_v2(token, transactional_id, producer_id, producer_epoch, committed, fresh_producer_id)
            return
        self._end(transactional_id, producer_id, producer_epoch, committed, True,
                  lambda error: self._reply(token, {"error_code": error}))

    def _end_v2(self, token: int, transactional_id: str, producer_id: int, producer_epoch: int,
                committed: bool, fresh_producer_id: int | None) -> None:
        """Kafka's ``endTransaction`` for transaction version 2: every end bumps the epoch (the
        markers carry the bumped one, so the ended transaction's producer is fenced from it);
        a retry of an end that already happened is answered with the result it had."""

        def reply(code: ErrorCode, answer: tuple[int, int] = (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)) -> None:
            self._reply(token, {"error_code": code, "producer_id": answer[0], "producer_epoch": answer[1]})

        txn = self.txns.get(transactional_id)
        if txn is None:
            reply(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
            return
        if txn.pending_transition:
            reply(ErrorCode.CONCURRENT_TRANSACTIONS)
            return
        # A retry of an end that bumped the epoch (or, at an exhausted epoch, moved to a new id).
        retry_on_bump = txn.producer_epoch == producer_epoch + 1
        retry_on_overflow = (txn.prev_producer_id == producer_id and producer_epoch == MAX_PRODUCER_EPOCH - 1
                             and txn.producer_epoch == 0)
        if txn.producer_id != producer_id and not retry_on_overflow:
            reply(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
            return
        if txn.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            valid = retry_on_bump
        elif txn.state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            valid = retry_on_bump or retry_on_overflow or producer_epoch == txn.producer_epoch
        else:
            valid = producer_epoch == txn.producer_epoch
        if not valid:
            reply(ErrorCode.PRODUCER_FENCED)
            return
        retry = retry_on_bump or retry_on_overflow
        state = txn.state
        if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            # The same end again while its markers are written: wait; the other end: refused.
            reply(ErrorCode.CONCURRENT_TRANSACTIONS if committed == (state == S.PREPARE_COMMIT)
                  else ErrorCode.INVALID_TXN_STATE)
            return
        if state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and retry:
            if committed == (state == S.COMPLETE_COMMIT):
                reply(ErrorCode.NONE, (txn.producer_id, txn.producer_epoch))
            else:
                reply(ErrorCode.INVALID_TXN_STATE)
            return
        if committed and state != S.ONGOING:
            reply(ErrorCode.INVALID_TXN_STATE)  # nothing to commit
            return
        if state not in (S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            raise IllegalTransition(f"{txn}: EndTxn in state {state.label}")
        # Ongoing: commit or abort. Empty or Complete*: an abort the client is unsure it needs
        # (allowed in version 2); it bumps the epoch and has no partitions, so no markers.
        next_producer_id = NO_PRODUCER_ID
        if epoch_exhausted(txn.producer_epoch):
            if fresh_producer_id is None:
                raise NeedProducerId
            next_producer_id = fresh_producer_id
        target = S.PREPARE_COMMIT if committed else S.PREPARE_ABORT
        transit = txn.prepare_abort_or_commit(target, self.now_ms, 2, next_producer_id=next_producer_id,
                                              no_partition_added=state != S.ONGOING)
        coordinator_epoch = self.coordinator_epoch

        def written(error: ErrorCode) -> None:
            if error != ErrorCode.NONE:
                txn.cancel_pending()
                reply(error)
                return
            txn.complete(transit)
            if self.coordinator_epoch != coordinator_epoch:
                reply(ErrorCode.NOT_COORDINATOR)
                return
            # The id and epoch the client goes on with: a new id at epoch 0 after an overflow.
            if txn.next_producer_id != NO_PRODUCER_ID:
                reply(ErrorCode.NONE, (txn.next_producer_id, 0))
            else:
                reply(ErrorCode.NONE, (txn.producer_id, txn.producer_epoch))
            self._send_markers(txn)

        self._write(transactional_id, transit, written)

    def _end(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool,
             from_client: bool, done: Callable[[ErrorCode], None]) -> None:
        """End the transaction: Prepare* written, then (answer, and) markers; as Kafka's
        ``endTransaction``. Not from a client: an abort after an epoch fence (InitProducerId,
        timeout), whose ``producer_epoch`` is the bumped one."""
        txn = self.txns.get(transactional_id)
        fencing = txn is not None and txn.pending == S.PREPARE_EPOCH_FENCE
        error = ErrorCode.NONE
        if txn is None or txn.producer_id != producer_id:
            error = ErrorCode.INVALID_PRODUCER_ID_MAPPING
        elif (from_client and producer_epoch != txn.producer_epoch) or producer_epoch < txn.producer_epoch:
            error = ErrorCode.PRODUCER_FENCED
        elif txn.pending_transition and not fencing:
            error = ErrorCode.CONCURRENT_TRANSACTIONS
        elif txn.state != S.ONGOING:
            error = _end_in_state(txn.state, committed)
        if error != ErrorCode.NONE or txn is None or txn.state != S.ONGOING:
            if fencing and txn is not None:
                txn.cancel_pending()
            done(error)
            return
        target = S.PREPARE_COMMIT if committed else S.PREPARE_ABORT
        if fencing:
            # The fence's bumped epoch becomes the metadata's now, written with PrepareAbort.
            txn.cancel_pending()
            txn.producer_epoch = producer_epoch
            txn.last_producer_epoch = NO_PRODUCER_EPOCH
        transit = txn.prepare_abort_or_commit(target, self.now_ms, CLIENT_TRANSACTION_VERSION)
        coordinator_epoch = self.coordinator_epoch

        def written(error: ErrorCode) -> None:
            if error != ErrorCode.NONE:
                txn.cancel_pending()
                if fencing:
                    txn.failed_epoch_fence = True
                    log.warning("transactional id %s: fencing epoch %d could not be written: %s",
                                transactional_id, producer_epoch, error.name)
                done(error)
                return
            txn.complete(transit)
            if self.coordinator_epoch != coordinator_epoch:
                done(ErrorCode.NOT_COORDINATOR)
                return
            done(ErrorCode.NONE)
            self._send_markers(txn)

        self._write(transactional_id, transit, written)

    def _send_markers(self, txn: TxnMetadata, prepared_ms: int | None = None) -> None:
        committed = txn.state == S.PREPARE_COMMIT
        producer_id, producer_epoch, partitions = txn.producer_id, txn.producer_epoch, txn.partitions
        complete = txn.prepare_complete(self.now_ms)  # pending until every marker is written
        self._out.markers.append(MarkerJob(txn.transactional_id, self.coordinator_epoch, producer_id,
                                           producer_epoch, committed, partitions, complete,
                                           prepared_ms=self.now_ms if prepared_ms is None else prepared_ms))

    def markers_written(self, job: MarkerJob) -> None:
        """Every partition leader wrote the job's marker: append Complete*."""
        txn = self.txns.get(job.transactional_id)
        if txn is None or txn.pending != job.complete.state or job.coordinator_epoch != self.coordinator_epoch:
            log.info("transactional id %s: markers written, but the transaction moved on (%s)",
                     job.transactional_id, txn)
            return

        def written(error: ErrorCode) -> None:
            if error == ErrorCode.NONE:
                txn.complete(job.complete)
                log.debug("transactional id %s: %s", job.transactional_id, txn.state.label)
                if job.prepared_ms >= 0:
                    self._out.completed.append((job.committed, max(0, self.now_ms - job.prepared_ms)))
            elif error == ErrorCode.COORDINATOR_NOT_AVAILABLE:
                # Kafka retries this append (the markers are written; only the record is missing).
                self._out.markers.append(replace(job, partitions=frozenset(), attempt=job.attempt + 1))
            else:
                log.warning("transactional id %s: %s could not be written: %s", job.transactional_id,
                            job.complete.state.label, error.name)
                txn.cancel_pending()

        self._write(job.transactional_id, job.complete, written)

    def markers_abandoned(self, job: MarkerJob) -> None:
        """A leader refused the markers for good (a newer producer epoch or coordinator epoch
        there): Kafka stops sending and leaves the transaction as it is."""
        log.warning("transactional id %s: stopped writing markers (producer %d epoch %d)", job.transactional_id,
                    job.producer_id, job.producer_epoch)

    # Timers ------------------------------------------------------------------------------

    def abort_timed_out(self) -> None:
        """Abort transactions open longer than their timeout, fencing their producer."""
        for txn in list(self.txns.values()):
            if txn.state != S.ONGOING or txn.pending_transition or txn.start_ms + txn.timeout_ms >= self.now_ms:
                continue
            log.info("transactional id %s: aborting the transaction open since %d (timeout %d ms)",
                     txn.transactional_id, txn.start_ms, txn.timeout_ms)
            fence = txn.prepare_fence_epoch()
            self._end(txn.transactional_id, fence.producer_id, fence.producer_epoch, False, False,
                      functools.partial(_log_timeout_abort, txn.transactional_id))

    def expire_transactional_ids(self) -> None:
        """Forget ids idle for ``transactional.id.expiration.ms`` (a tombstone, then gone)."""
        horizon = self.now_ms - self.config.transactional_id_expiration_ms
        for txn in list(self.txns.values()):
            if txn.state not in EXPIRATION_ALLOWED or txn.pending_transition or txn.last_update_ms > horizon:
                continue
            txn.prepare_dead()

            def written(error: ErrorCode, txn: TxnMetadata = txn) -> None:
                if error == ErrorCode.NONE and self.txns.get(txn.transactional_id) is txn:
                    del self.txns[txn.transactional_id]
                    log.info("transactional id %s expired", txn.transactional_id)
                else:
                    txn.cancel_pending()

            self._write(txn.transactional_id, None, written)

    # Admin -------------------------------------------------------------------------------

    # Introspection -----------------------------------------------------------------------

    def open_transactions(self) -> tuple[int, int | None]:
        """How many transactions are open (Ongoing or Prepare*, that is not yet Complete*) and
        when the oldest of them started (None when none is open)."""
        starts = [txn.start_ms for txn in self.txns.values() if txn.state in _OPEN]
        return len(starts), (min(starts) if starts else None)

    def describe(self, transactional_id: str) -> Body:
        txn = self.txns.get(transactional_id)
        if txn is None or txn.state == S.DEAD:
            return {"error_code": ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, "transactional_id": transactional_id,
                    "transaction_state": "", "transaction_start_time_ms": -1, "producer_id": -1,
                    "producer_epoch": -1, "topics": []}
        topics: dict[str, list[int]] = {}
        for topic, index in sorted(txn.partitions):
            topics.setdefault(topic, []).append(index)
        return {"error_code": ErrorCode.NONE, "transactional_id": transactional_id,
                "transaction_state": txn.state.label, "transaction_timeout_ms": txn.timeout_ms,
                "transaction_start_time_ms": txn.start_ms, "producer_id": txn.producer_id,
                "producer_epoch": txn.producer_epoch,
                "topics": [{"topic": t, "partitions": p} for t, p in topics.items()]}

    def list_transactions(self, now_ms: int, states: frozenset[str], producer_ids: frozenset[int],
                          duration_ms: int, pattern: re.Pattern[str] | None) -> list[Body]:
        out = []
        for txn in self.txns.values():
            if txn.state == S.DEAD:
                continue
            if producer_ids and txn.producer_id not in producer_ids:
                continue
            if states and txn.state.label not in states:
                continue
            if duration_ms >= 0 and now_ms - txn.start_ms <= duration_ms:
                continue
            if pattern is not None and not pattern.fullmatch(txn.transactional_id):
                continue
            out.append({"transactional_id": txn.transactional_id, "producer_id": txn.producer_id,
                        "transaction_state": txn.state.label})
        return out


_OPEN = frozenset({S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT})


def _init_error(code: ErrorCode) -> Body:
    return {"error_code": code, "producer_id": -1, "producer_epoch": -1}


def _valid_expected_producer(txn: TxnMetadata, producer_id: int, producer_epoch: int) -> bool:
    """KIP-360: the producer id a recovering client names must be this id's (or, right after an
    epoch exhaustion, its previous one); an id whose metadata was just created accepts any."""
    return (txn.producer_epoch == NO_PRODUCER_EPOCH or producer_id == txn.producer_id
            or (producer_id == txn.prev_producer_id and epoch_exhausted(producer_epoch)))


def _end_in_state(state: TxnState, committed: bool) -> ErrorCode:
    """EndTxn outside Ongoing: a retry of what is done or under way is fine (NONE, or
    CONCURRENT_TRANSACTIONS while it completes); anything else is INVALID_TXN_STATE."""
    if state == S.COMPLETE_COMMIT:
        return ErrorCode.NONE if committed else ErrorCode.INVALID_TXN_STATE
    if state == S.COMPLETE_ABORT:
        return ErrorCode.INVALID_TXN_STATE if committed else ErrorCode.NONE
    if state == S.PREPARE_COMMIT:
        return ErrorCode.CONCURRENT_TRANSACTIONS if committed else ErrorCode.INVALID_TXN_STATE
    if state == S.PREPARE_ABORT:
        return ErrorCode.INVALID_TXN_STATE if committed else ErrorCode.CONCURRENT_TRANSACTIONS
    if state == S.EMPTY:
        return ErrorCode.INVALID_TXN_STATE
    raise IllegalTransition(f"EndTxn in state {state.label}")


def _log_timeout_abort(transactional_id: str, error: ErrorCode) -> None:
    if error == ErrorCode.NONE:
        log.info("transactional id %s: timed-out transaction rolled back", transactional_id)
    elif error in (ErrorCode.INVALID_PRODUCER_ID_MAPPING, ErrorCode.PRODUCER_FENCED,
                   ErrorCode.CONCURRENT_TRANSACTIONS):
        log.debug("transactional id %s: timeout abort cancelled: %s", transactional_id, error.name)
    else:
        log.warning("transactional id %s: timeout abort failed: %s", transactional_id, error.name)
