"""The transaction coordinator's pure state machine (``transactions/shard.py`` and ``state.py``)
driven by hand: time, writes and marker completions are the test's to give, so every Kafka rule
(transitions, error codes, fencing, timeouts, expiry, loading) is checked without a broker."""

from __future__ import annotations

import re

import pytest
from riverlog.protocol.errors import ErrorCode
from riverlog.transactions.config import TxnConfig
from riverlog.transactions.records import TxnLogRecord
from riverlog.transactions.shard import MarkerJob, NeedProducerId, Result, TxnShard
from riverlog.transactions.state import MAX_PRODUCER_EPOCH, IllegalTransition, TxnMetadata, TxnState

pytestmark = pytest.mark.unit

S = TxnState
E = ErrorCode
TID = "tx-1"
T0 = 1_000_000
COORDINATOR_EPOCH = 4


class Driver:
    """A shard plus the plumbing the asyncio shell would do: tokens, writes, markers."""

    def __init__(self, config: TxnConfig | None = None) -> None:
        self.shard = TxnShard(7, COORDINATOR_EPOCH, config or TxnConfig())
        self.now = T0
        self.replies: dict[int, dict[str, object]] = {}
        self.written: list[TxnLogRecord] = []
        self.jobs: list[MarkerJob] = []
        self.completed: list[tuple[bool, int]] = []  # (committed, ms from Prepare* to Complete*)
        self._token = 0

    def _absorb(self, result: Result, write_error: ErrorCode | None) -> None:
        self.replies.update(result.replies)
        self.jobs.extend(result.markers)
        self.completed.extend(result.completed)
        if result.after_write and write_error is not None:
            if write_error == E.NONE:
                self.written.extend(result.records)
            self._absorb(self.shard.complete_write(result.after_write, write_error, self.now), E.NONE)

    def call(self, method: str, *args: object, write_error: ErrorCode | None = E.NONE) -> dict[str, object]:
        """Run a request; its records are written (or fail with ``write_error``; None: left
        pending). Returns its reply ({} if none yet)."""
        self._token += 1
        token = self._token
        self._absorb(self.shard.run(self.now, getattr(self.shard, method), token, *args), write_error)
        return self.replies.get(token, {})

    def op(self, method: str, *args: object, write_error: ErrorCode = E.NONE) -> None:
        self._absorb(self.shard.run(self.now, getattr(self.shard, method), *args), write_error)

    def init(self, fresh: int | None = 1000, expected: tuple[int, int] | None = None,
             timeout: int = 60_000) -> dict[str, object]:
        return self.call("init_producer_id", TID, timeout, expected, fresh)

    def finish_markers(self) -> None:
        jobs, self.jobs = self.jobs, []
        for job in jobs:
            self.op("markers_written", job)

    @property
    def txn(self) -> TxnMetadata:
        return self.shard.txns[TID]


def ongoing(d: Driver, *partitions: tuple[str, int]) -> None:
    d.init()
    assert d.call("add_partitions", TID, 1000, 0, partitions or [("t", 0)]) == {"error_code": E.NONE}


def test_new_id_needs_a_producer_id_then_gets_epoch_0() -> None:
    d = Driver()
    with pytest.raises(NeedProducerId):
        d.init(fresh=None)
    assert TID not in d.shard.txns  # nothing changed before the id was there
    assert d.init() == {"error_code": E.NONE, "producer_id": 1000, "producer_epoch": 0}
    assert d.txn.state == S.EMPTY and d.txn.pending is None
    assert [(r.transactional_id, r.value.state, r.value.producer_epoch) for r in d.written if r.value] == [
        (TID, S.EMPTY, 0)]
    # Initialising again bumps the epoch of the same producer id.
    assert d.init(fresh=None) == {"error_code": E.NONE, "producer_id": 1000, "producer_epoch": 1}


def test_commit_goes_through_prepare_markers_complete() -> None:
    d = Driver()
    d.init()
    d.now += 10
    assert d.call("add_partitions", TID, 1000, 0, [("a", 0), ("b", 1)]) == {"error_code": E.NONE}
    assert d.txn.state == S.ONGOING and d.txn.start_ms == T0 + 10
    # Adding what is already there writes nothing.
    before = len(d.written)
    assert d.call("add_partitions", TID, 1000, 0, [("a", 0)]) == {"error_code": E.NONE}
    assert len(d.written) == before
    assert d.call("end_txn", TID, 1000, 0, True) == {"error_code": E.NONE}
    assert d.written[-1].value is not None and d.written[-1].value.state == S.PREPARE_COMMIT
    (job,) = d.jobs
    assert (job.producer_id, job.producer_epoch, job.committed, job.coordinator_epoch, job.partitions) == (
        1000, 0, True, COORDINATOR_EPOCH, frozenset({("a", 0), ("b", 1)}))
    # While markers are written, the transaction is busy.
    assert d.txn.state == S.PREPARE_COMMIT and d.txn.pending == S.COMPLETE_COMMIT
    assert d.call("add_partitions", TID, 1000, 0, [("c", 0)]) == {"error_code": E.CONCURRENT_TRANSACTIONS}
    assert d.call("end_txn", TID, 1000, 0, True) == {"error_code": E.CONCURRENT_TRANSACTIONS}
    assert d.init(fresh=None)["error_code"] == E.CONCURRENT_TRANSACTIONS
    d.finish_markers()
    assert d.txn.state == S.COMPLETE_COMMIT and d.txn.partitions == frozenset()
    assert d.written[-1].value is not None and d.written[-1].value.state == S.COMPLETE_COMMIT
    # A retried commit is fine, an abort now is not.
    assert d.call("end_txn", TID, 1000, 0, True) == {"error_code": E.NONE}
    assert d.call("end_txn", TID, 1000, 0, False) == {"error_code": E.INVALID_TXN_STATE}
    # The next transaction starts from CompleteCommit.
    assert d.call("add_partitions", TID, 1000, 0, [("c", 0)]) == {"error_code": E.NONE}
    assert d.txn.partitions == frozenset({("c", 0)})


@pytest.mark.parametrize(("state_setup", "committed", "expected"), [
    ("empty", True, E.INVALID_TXN_STATE),
    ("empty", False, E.INVALID_TXN_STATE),
    ("prepare_abort", False, E.CONCURRENT_TRANSACTIONS),
    ("prepare_abort", True, E.CONCURRENT_TRANSACTIONS),  # markers pending: busy comes first, as in Kafka
    ("complete_abort", False, E.NONE),
    ("complete_abort", True, E.INVALID_TXN_STATE),
])
def test_end_txn_outside_ongoing(state_setup: str, committed: bool, expected: ErrorCode) -> None:
    d = Driver()
    d.init()
    if state_setup != "empty":
        d.call("add_partitions", TID, 1000, 0, [("t", 0)])
        d.call("end_txn", TID, 1000, 0, False)
        if state_setup == "complete_abort":
            d.finish_markers()
    assert d.call("end_txn", TID, 1000, 0, committed) == {"error_code": expected}


def test_producer_checks() -> None:
    d = Driver()
    assert d.call("add_partitions", TID, 1000, 0, [("t", 0)]) == {"error_code": E.INVALID_PRODUCER_ID_MAPPING}
    assert d.call("end_txn", TID, 1000, 0, True) == {"error_code": E.INVALID_PRODUCER_ID_MAPPING}
    ongoing(d)
    assert d.call("add_partitions", TID, 999, 0, [("t", 1)]) == {"error_code": E.INVALID_PRODUCER_ID_MAPPING}
    assert d.call("add_partitions", TID, 1000, 1, [("t", 1)]) == {"error_code": E.PRODUCER_FENCED}
    assert d.call("end_txn", TID, 1000, 1, True) == {"error_code": E.PRODUCER_FENCED}


def test_a_new_incarnation_fences_and_aborts_the_open_transaction() -> None:
    d = Driver()
    ongoing(d, ("t", 0), ("u", 3))
    # The new producer's InitProducerId: the open transaction is aborted with a bumped epoch,
    # and the client is told to retry.
    assert d.init(fresh=None) == {"error_code": E.CONCURRENT_TRANSACTIONS, "producer_id": -1, "producer_epoch": -1}
    assert d.txn.state == S.PREPARE_ABORT and d.txn.producer_epoch == 1
    assert d.written[-1].value is not None and (d.written[-1].value.state, d.written[-1].value.producer_epoch) == (
        S.PREPARE_ABORT, 1)
    (job,) = d.jobs
    assert (job.committed, job.producer_epoch, job.partitions) == (False, 1, frozenset({("t", 0), ("u", 3)}))
    # The zombie cannot commit.
    assert d.call("end_txn", TID, 1000, 0, True) == {"error_code": E.PRODUCER_FENCED}
    assert d.init(fresh=None)["error_code"] == E.CONCURRENT_TRANSACTIONS  # markers still going
    d.finish_markers()
    assert d.txn.state == S.COMPLETE_ABORT
    assert d.init(fresh=None) == {"error_code": E.NONE, "producer_id": 1000, "producer_epoch": 2}


def test_a_failed_fence_write_does_not_bump_twice() -> None:
    d = Driver()
    ongoing(d)
    d._token += 1
    result = d.shard.run(d.now, d.shard.init_producer_id, d._token, TID, 60_000, None, None)
    d._absorb(result, E.NOT_ENOUGH_REPLICAS)
    assert d.replies[d._token]["error_code"] == E.NOT_ENOUGH_REPLICAS
    assert d.txn.state == S.ONGOING and d.txn.pending is None and d.txn.failed_epoch_fence
    assert d.txn.producer_epoch == 1  # bumped in memory, never returned to a client
    d.init(fresh=None)
    assert d.txn.state == S.PREPARE_ABORT and d.txn.producer_epoch == 1


def test_timed_out_transactions_are_aborted_and_the_producer_fenced() -> None:
    d = Driver()
    d.init(timeout=5000)
    d.call("add_partitions", TID, 1000, 0, [("t", 0)])
    d.now = T0 + 5000
    d.op("abort_timed_out")
    assert d.txn.state == S.ONGOING  # not yet: strictly longer than the timeout
    d.now = T0 + 5001
    d.op("abort_timed_out")
    assert d.txn.state == S.PREPARE_ABORT and d.txn.producer_epoch == 1
    (job,) = d.jobs
    assert not job.committed and job.producer_epoch == 1
    assert d.call("end_txn", TID, 1000, 0, True) == {"error_code": E.PRODUCER_FENCED}
    d.finish_markers()
    assert d.txn.state == S.COMPLETE_ABORT
    d.now += 100_000
    d.op("abort_timed_out")
    assert not d.jobs


def test_write_failure_leaves_the_metadata_as_it_was() -> None:
    d = Driver()
    d.init()
    assert d.call("add_partitions", TID, 1000, 0, [("t", 0)], write_error=E.NOT_COORDINATOR) == {
        "error_code": E.NOT_COORDINATOR}
    assert d.txn.state == S.EMPTY and d.txn.pending is None and d.txn.partitions == frozenset()
    # While a write is in flight, other requests wait for it (CONCURRENT_TRANSACTIONS).
    assert d.call("add_partitions", TID, 1000, 0, [("t", 0)], write_error=None) == {}
    assert d.call("end_txn", TID, 1000, 0, True) == {"error_code": E.CONCURRENT_TRANSACTIONS}


def test_complete_write_unavailable_is_retried() -> None:
    d = Driver()
    ongoing(d)
    d.call("end_txn", TID, 1000, 0, True)
    (job,) = d.jobs
    d.jobs = []
    d.op("markers_written", job, write_error=E.COORDINATOR_NOT_AVAILABLE)
    (retry,) = d.jobs
    assert retry.partitions == frozenset() and retry.attempt == 1 and d.txn.pending == S.COMPLETE_COMMIT
    d.finish_markers()
    assert d.txn.state == S.COMPLETE_COMMIT


def test_kip_360_expected_producer_and_epoch() -> None:
    d = Driver()
    d.init()  # epoch 0
    d.init(fresh=None)  # epoch 1, last epoch 0 forgotten (no expected epoch)
    assert d.init(fresh=None, expected=(1000, 1)) == {"error_code": E.NONE, "producer_id": 1000, "producer_epoch": 2}
    # A retry of that bump (the client never saw the answer) gets the same epoch again.
    assert d.init(fresh=None, expected=(1000, 1)) == {"error_code": E.NONE, "producer_id": 1000, "producer_epoch": 2}
    assert d.init(fresh=None, expected=(1000, 0))["error_code"] == E.PRODUCER_FENCED
    assert d.init(fresh=None, expected=(555, 2))["error_code"] == E.PRODUCER_FENCED


def test_exhausted_epochs_rotate_the_producer_id() -> None:
    d = Driver()
    d.init()
    d.txn.producer_epoch = MAX_PRODUCER_EPOCH - 1
    with pytest.raises(NeedProducerId):
        d.init(fresh=None)
    assert d.init(fresh=2000) == {"error_code": E.NONE, "producer_id": 2000, "producer_epoch": 0}
    assert d.txn.prev_producer_id == 1000


def test_a_recovering_producer_on_an_exhausted_epoch_gets_a_new_id_once() -> None:
    d = Driver()
    d.init()
    d.txn.producer_epoch = MAX_PRODUCER_EPOCH - 1
    exhausted = (1000, MAX_PRODUCER_EPOCH - 1)
    assert d.init(fresh=2000, expected=exhausted) == {"error_code": E.NONE, "producer_id": 2000, "producer_epoch": 0}
    # A retry with the old id (the answer was lost) gets the same new id and epoch.
    assert d.init(fresh=None, expected=exhausted) == {"error_code": E.NONE, "producer_id": 2000, "producer_epoch": 0}


def test_verify_partitions() -> None:
    d = Driver()
    ongoing(d, ("t", 0))
    assert d.shard.verify_partitions(TID, 1000, 0, [("t", 0), ("t", 1)]) == {
        ("t", 0): E.NONE, ("t", 1): E.TRANSACTION_ABORTABLE}
    assert d.shard.verify_partitions(TID, 1000, 3, [("t", 0)]) == {("t", 0): E.PRODUCER_FENCED}
    assert d.shard.verify_partitions("other", 1000, 0, [("t", 0)]) == {("t", 0): E.INVALID_PRODUCER_ID_MAPPING}
    d.call("end_txn", TID, 1000, 0, True)
    assert d.shard.verify_partitions(TID, 1000, 0, [("t", 0)]) == {("t", 0): E.CONCURRENT_TRANSACTIONS}


def test_loading_resends_markers_of_prepared_transactions() -> None:
    d = Driver()
    ongoing(d, ("t", 0))
    d.call("end_txn", TID, 1000, 0, False)
    log = list(d.written)
    fresh = TxnShard(7, COORDINATOR_EPOCH + 1, TxnConfig())
    for record in log:
        fresh.replay(record)
    result = fresh.run(T0, fresh.on_loaded)
    (job,) = result.markers
    assert (job.committed, job.coordinator_epoch, job.partitions) == (False, COORDINATOR_EPOCH + 1,
                                                                      frozenset({("t", 0)}))
    assert fresh.txns[TID].state == S.PREPARE_ABORT and fresh.txns[TID].pending == S.COMPLETE_ABORT
    # A tombstone forgets the id.
    fresh.replay(TxnLogRecord(TID, None))
    assert TID not in fresh.txns


def test_idle_ids_expire_with_a_tombstone() -> None:
    d = Driver(TxnConfig(transactional_id_expiration_ms=1000))
    d.init()
    ongoing_id = "tx-open"
    d._token += 1
    d._absorb(d.shard.run(d.now, d.shard.init_producer_id, d._token, ongoing_id, 60_000, None, 1001), E.NONE)
    d.call("add_partitions", ongoing_id, 1001, 0, [("t", 0)])
    d.now = T0 + 1000
    d.op("expire_transactional_ids")
    assert d.written[-1] == TxnLogRecord(TID, None) and TID not in d.shard.txns
    assert ongoing_id in d.shard.txns  # an open transaction never expires


def test_describe_and_list() -> None:
    d = Driver()
    ongoing(d, ("b", 1), ("a", 0), ("a", 2))
    described = d.shard.describe(TID)
    assert described["error_code"] == E.NONE and described["transaction_state"] == "Ongoing"
    assert described["topics"] == [{"topic": "a", "partitions": [0, 2]}, {"topic": "b", "partitions": [1]}]
    assert d.shard.describe("nope")["error_code"] == E.TRANSACTIONAL_ID_NOT_FOUND
    everything = d.shard.list_transactions(T0, frozenset(), frozenset(), -1, None)
    assert everything == [{"transactional_id": TID, "producer_id": 1000, "transaction_state": "Ongoing"}]
    assert d.shard.list_transactions(T0, frozenset({"Empty"}), frozenset(), -1, None) == []
    assert d.shard.list_transactions(T0, frozenset(), frozenset({7}), -1, None) == []
    assert d.shard.list_transactions(T0 + 10, frozenset(), frozenset(), 10, None) == []
    assert d.shard.list_transactions(T0 + 11, frozenset(), frozenset(), 10, None) == everything
    assert d.shard.list_transactions(T0, frozenset(), frozenset(), -1, re.compile("tx")) == []
    assert d.shard.list_transactions(T0, frozenset(), frozenset(), -1, re.compile("tx-.")) == everything


def test_illegal_transitions_are_refused() -> None:
    txn = TxnMetadata(TID, 1, producer_epoch=0)
    with pytest.raises(IllegalTransition):
        txn.prepare_abort_or_commit(S.PREPARE_COMMIT, T0, 0)  # from Empty
    txn.prepare_add_partitions(frozenset({("t", 0)}), T0, 0)
    with pytest.raises(IllegalTransition):
        txn.prepare_add_partitions(frozenset({("t", 1)}), T0, 0)  # one transition at a time
    for state in S:
        assert S(state).label and S.from_label(S(state).label) == state


def test_open_transactions_and_marker_latency_for_metrics() -> None:
    """What the metrics read: open transactions (Ongoing and Prepare*) with the oldest start, and
    per completed transaction the time from Prepare* written to Complete* written."""
    d = Driver()
    d.init()
    assert d.shard.open_transactions() == (0, None)
    d.now += 5
    assert d.call("add_partitions", TID, 1000, 0, [("t", 0)]) == {"error_code": E.NONE}
    assert d.shard.open_transactions() == (1, T0 + 5)
    d.now += 100
    assert d.call("end_txn", TID, 1000, 0, True) == {"error_code": E.NONE}
    (job,) = d.jobs
    assert job.prepared_ms == T0 + 105
    assert d.shard.open_transactions() == (1, T0 + 5)  # PrepareCommit: still open
    d.now += 40
    d.finish_markers()
    assert d.completed == [(True, 40)]
    assert d.shard.open_transactions() == (0, None)
    # An abort, whose Complete* first fails to be written: measured once, when it is.
    assert d.call("add_partitions", TID, 1000, 0, [("t", 0)]) == {"error_code": E.NONE}
    assert d.call("end_txn", TID, 1000, 0, False) == {"error_code": E.NONE}
    (job,) = d.jobs
    d.jobs = []
    d.now += 7
    d.op("markers_written", job, write_error=E.COORDINATOR_NOT_AVAILABLE)  # retried, as Kafka does
    assert d.completed == [(True, 40)] and d.shard.open_transactions()[0] == 1
    d.now += 3
    d.finish_markers()
    assert d.completed == [(True, 40), (False, 10)]
    assert d.shard.open_transactions() == (0, None)


def test_transaction_found_prepared_on_loading_is_timed_from_its_prepare_record() -> None:
    d = Driver()
    ongoing(d)
    d.now += 50
    d.call("end_txn", TID, 1000, 0, False)
    prepared = [r for r in d.written if r.value is not None and r.value.state == S.PREPARE_ABORT][-1]
    loaded = Driver()
    loaded.now = d.now + 1000
    for record in d.written:
        loaded.shard.replay(record)
    loaded.op("on_loaded")
    (job,) = loaded.jobs
    assert prepared.value is not None and job.prepared_ms == prepared.value.last_update_ms
    assert loaded.shard.open_transactions() == (1, d.txn.start_ms)
    loaded.finish_markers()
    assert loaded.completed == [(False, loaded.now - prepared.value.last_update_ms)]


# Transaction version 2 (KIP-890 part 2: EndTxn v5, partitions added by their leaders) ----------

V2 = 2


def end_v2(d: Driver, epoch: int, committed: bool, producer_id: int = 1000,
           fresh: int | None = None) -> dict[str, object]:
    return d.call("end_txn", TID, producer_id, epoch, committed, V2, fresh)


def answer(code: ErrorCode, producer_id: int = -1, epoch: int = -1) -> dict[str, object]:
    return {"error_code": code, "producer_id": producer_id, "producer_epoch": epoch}


def test_v2_every_end_bumps_the_epoch_and_the_markers_carry_it() -> None:
    d = Driver()
    d.init()
    assert d.call("add_partitions", TID, 1000, 0, [("a", 0), ("b", 1)], V2) == {"error_code": E.NONE}
    assert d.txn.client_transaction_version == V2
    assert end_v2(d, 0, True) == answer(E.NONE, 1000, 1)
    prepared = d.written[-1].value
    assert prepared is not None and (prepared.state, prepared.producer_epoch, prepared.last_producer_epoch) == (
        S.PREPARE_COMMIT, 1, 0)
    (job,) = d.jobs
    assert (job.producer_id, job.producer_epoch, job.committed) == (1000, 1, True)
    # The same commit again while markers are written: busy; the other end: refused.
    assert end_v2(d, 0, True) == answer(E.CONCURRENT_TRANSACTIONS)
    d.finish_markers()
    assert (d.txn.state, d.txn.producer_epoch) == (S.COMPLETE_COMMIT, 1)
    # A retry of the finished commit (its answer was lost) gets the same answer; an abort with
    # the old epoch does not, and the old epoch is fenced for anything new.
    assert end_v2(d, 0, True) == answer(E.NONE, 1000, 1)
    assert end_v2(d, 0, False) == answer(E.INVALID_TXN_STATE)
    assert d.call("add_partitions", TID, 1000, 0, [("a", 0)], V2) == {"error_code": E.PRODUCER_FENCED}
    # The next transaction runs at the bumped epoch and bumps again.
    assert d.call("add_partitions", TID, 1000, 1, [("a", 0)], V2) == {"error_code": E.NONE}
    assert end_v2(d, 1, False) == answer(E.NONE, 1000, 2)
    (job,) = d.jobs
    assert (job.producer_epoch, job.committed, job.partitions) == (2, False, frozenset({("a", 0)}))


def test_v2_retry_while_prepared_and_fenced_epochs() -> None:
    d = Driver()
    d.init()
    d.call("add_partitions", TID, 1000, 0, [("t", 0)], V2)
    assert end_v2(d, 0, False) == answer(E.NONE, 1000, 1)
    # Markers under way: any end waits (busy comes first, as in Kafka).
    assert end_v2(d, 0, True) == answer(E.CONCURRENT_TRANSACTIONS)
    d.finish_markers()
    assert end_v2(d, 0, False) == answer(E.NONE, 1000, 1)  # retry of the abort
    assert end_v2(d, 5, False) == answer(E.PRODUCER_FENCED)
    assert end_v2(d, 1, False, producer_id=999) == answer(E.INVALID_PRODUCER_ID_MAPPING)


def test_v2_abort_without_a_transaction_bumps_and_writes_no_marker() -> None:
    d = Driver()
    d.init()
    assert end_v2(d, 0, True) == answer(E.INVALID_TXN_STATE)  # nothing to commit
    assert end_v2(d, 0, False) == answer(E.NONE, 1000, 1)
    (job,) = d.jobs
    assert job.partitions == frozenset()
    d.finish_markers()
    assert (d.txn.state, d.txn.producer_epoch) == (S.COMPLETE_ABORT, 1)
    # From CompleteAbort, a new abort (not a retry: the current epoch) bumps again.
    assert end_v2(d, 1, False) == answer(E.NONE, 1000, 2)
    d.finish_markers()
    assert (d.txn.state, d.txn.producer_epoch) == (S.COMPLETE_ABORT, 2)


def test_v2_exhausted_epoch_moves_to_a_new_producer_id_at_the_end() -> None:
    d = Driver()
    d.init()
    last = MAX_PRODUCER_EPOCH - 1
    d.txn.producer_epoch = last
    d.call("add_partitions", TID, 1000, last, [("t", 0)], V2)
    with pytest.raises(NeedProducerId):
        end_v2(d, last, True)
    assert d.txn.state == S.ONGOING and not d.txn.pending_transition  # nothing changed
    assert end_v2(d, last, True, fresh=2000) == answer(E.NONE, 2000, 0)
    (job,) = d.jobs  # the markers still fence the old id, at the last epoch
    assert (job.producer_id, job.producer_epoch) == (1000, MAX_PRODUCER_EPOCH)
    d.finish_markers()
    assert (d.txn.state, d.txn.producer_id, d.txn.producer_epoch, d.txn.prev_producer_id) == (
        S.COMPLETE_COMMIT, 2000, 0, 1000)
    # A retry with the old id and epoch is answered with the new ones.
    assert end_v2(d, last, True) == answer(E.NONE, 2000, 0)
    assert d.call("add_partitions", TID, 2000, 0, [("t", 0)], V2) == {"error_code": E.NONE}


def test_v2_client_late_after_a_timeout_abort_goes_on_with_the_bumped_epoch() -> None:
    d = Driver()
    d.init(timeout=5000)
    d.call("add_partitions", TID, 1000, 0, [("t", 0)], V2)
    d.now = T0 + 5001
    d.op("abort_timed_out")
    (job,) = d.jobs
    assert (job.producer_epoch, job.committed) == (1, False)
    d.finish_markers()
    # Version 1 would fence this client (PRODUCER_FENCED); version 2 answers its abort.
    assert end_v2(d, 0, False) == answer(E.NONE, 1000, 1)
    assert end_v2(d, 0, True) == answer(E.INVALID_TXN_STATE)
