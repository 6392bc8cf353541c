"""KIP-890 part 1 on the wire: a partition leader has the transaction coordinator verify a
classic transactional producer's first batch on a partition, so a batch for a partition its
transaction never added, or one arriving after the transaction ended (a late retry of an
aborted transaction's write), is refused instead of opening a transaction nobody will end (a
"hanging" transaction holding read_committed consumers back).

Driven with raw requests (Riverlog's own wire client) on one broker: InitProducerId,
FindCoordinator, AddPartitionsToTxn v3, Produce v10/v11 with transactional batches, EndTxn v3. Kafka 4.3.1 verifies
by default (``transaction.partition.verification.enable``) and answers the same codes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from riverlog.client.connection import BrokerConnection
from riverlog.protocol.api_keys import ApiKey
from riverlog.protocol.errors import ErrorCode
from riverlog.protocol.record_batch import NewRecord, build_batch
from support.brokers import BrokerProcess
from support.clients import create_topic
from support.txn_checks import READ_COMMITTED, end_offsets, wait_stable

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

TOPIC = "verified"
SETTINGS = {"transaction.state.log.num.partitions": "1", "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1"}
RETRIABLE = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
             ErrorCode.NOT_COORDINATOR, ErrorCode.CONCURRENT_TRANSACTIONS}


class Session:
    """One connection to the broker, which is also the transaction coordinator here."""

    def __init__(self, conn: BrokerConnection, transactional_id: str) -> None:
        self.conn = conn
        self.tid = transactional_id
        self.pid = -1
        self.epoch = -1
        self.sequence = {0: 0, 1: 0}

    async def until_done(self, api: ApiKey, body: dict[str, Any], version: int,
                         code_of: Callable[[dict[str, Any]], int]) -> dict[str, Any]:
        """Retry what a client would retry (the coordinator loading, markers under way)."""
        for _ in range(100):
            answer = await self.conn.request(api, body, version)
            if ErrorCode(code_of(answer)) not in RETRIABLE:
                return answer
            await asyncio.sleep(0.1)
        raise AssertionError(f"{api.name} kept answering a retriable error: {answer}")

    async def init(self) -> None:
        # The first FindCoordinator for a transactional id creates __transaction_state.
        found = await self.until_done(ApiKey.FIND_COORDINATOR, {"key_type": 1, "coordinator_keys": [self.tid]}, 4,
                                      lambda a: a["coordinators"][0]["error_code"])
        assert found["coordinators"][0]["error_code"] == ErrorCode.NONE, found
        answer = await self.until_done(ApiKey.INIT_PRODUCER_ID, {
            "transactional_id": self.tid, "transaction_timeout_ms": 60_000, "producer_id": -1,
            "producer_epoch": -1}, 3, lambda a: a["error_code"])
        assert answer["error_code"] == ErrorCode.NONE, answer
        self.pid, self.epoch = answer["producer_id"], answer["producer_epoch"]

    async def add(self, partition: int) -> None:
        answer = await self.until_done(ApiKey.ADD_PARTITIONS_TO_TXN, {
            "v3_and_below_transactional_id": self.tid, "v3_and_below_producer_id": self.pid,
            "v3_and_below_producer_epoch": self.epoch,
            "v3_and_below_topics": [{"name": TOPIC, "partitions": [partition]}]}, 3,
            lambda a: a["results_by_topic_v3_and_below"][0]["results_by_partition"][0]["partition_error_code"])
        code = answer["results_by_topic_v3_and_below"][0]["results_by_partition"][0]["partition_error_code"]
        assert code == ErrorCode.NONE, answer

    async def produce(self, partition: int, value: bytes, version: int, *, sequence: int | None = None) -> ErrorCode:
        seq = self.sequence[partition] if sequence is None else sequence
        batch = build_batch([NewRecord(value, b"k", [], 1_700_000_000_000)], producer_id=self.pid,
                            producer_epoch=self.epoch, base_sequence=seq, transactional=True)
        answer = await self.conn.request(ApiKey.PRODUCE, {
            "transactional_id": self.tid, "acks": -1, "timeout_ms": 10_000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": partition, "records": batch}]}]}, version)
        code = ErrorCode(answer["responses"][0]["partition_responses"][0]["error_code"])
        if code == ErrorCode.NONE and sequence is None:
            self.sequence[partition] += 1
        return code

    async def commit_offsets(self, group: str, version: int) -> ErrorCode:
        """TxnOffsetCommit of input offset 5 for ``group`` (whose coordinator is this broker)."""
        found = await self.until_done(ApiKey.FIND_COORDINATOR, {"key_type": 0, "coordinator_keys": [group]}, 4,
                                      lambda a: a["coordinators"][0]["error_code"])
        assert found["coordinators"][0]["error_code"] == ErrorCode.NONE, found
        answer = await self.until_done(ApiKey.TXN_OFFSET_COMMIT, {
            "transactional_id": self.tid, "group_id": group, "producer_id": self.pid, "producer_epoch": self.epoch,
            "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": 5,
                                                        "committed_metadata": ""}]}]}, version,
            lambda a: a["topics"][0]["partitions"][0]["error_code"])
        return ErrorCode(answer["topics"][0]["partitions"][0]["error_code"])

    async def add_offsets(self, group: str) -> None:
        answer = await self.until_done(ApiKey.ADD_OFFSETS_TO_TXN, {
            "transactional_id": self.tid, "producer_id": self.pid, "producer_epoch": self.epoch, "group_id": group},
            3, lambda a: a["error_code"])
        assert answer["error_code"] == ErrorCode.NONE, answer

    async def end(self, committed: bool) -> None:
        answer = await self.until_done(ApiKey.END_TXN, {
            "transactional_id": self.tid, "producer_id": self.pid, "producer_epoch": self.epoch,
            "committed": committed}, 3, lambda a: a["error_code"])
        assert answer["error_code"] == ErrorCode.NONE, answer


def run(broker: BrokerProcess, scenario: Callable[[Session], Any], transactional_id: str) -> Any:
    async def go() -> Any:
        conn = await BrokerConnection.connect(broker.host, broker.port, client_id="verification-test")
        try:
            session = Session(conn, transactional_id)
            await session.init()
            return await scenario(session)
        finally:
            await conn.close()

    return asyncio.run(go())


@pytest.fixture(scope="module")
def broker(module_broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    broker = module_broker_factory(SETTINGS)
    create_topic(broker.bootstrap, TOPIC, 2)
    return broker


def test_a_batch_for_a_partition_the_transaction_never_added_is_refused(broker: BrokerProcess) -> None:
    async def scenario(s: Session) -> tuple[ErrorCode, ...]:
        await s.add(0)
        added = await s.produce(0, b"in", 10)
        stray_v10 = await s.produce(1, b"stray", 10)
        stray_v11 = await s.produce(1, b"stray", 11)
        await s.end(committed=True)
        return added, stray_v10, stray_v11

    added, stray_v10, stray_v11 = run(broker, scenario, "verify-stray")
    assert added == ErrorCode.NONE
    # Not in the transaction: INVALID_TXN_STATE, or from Produce v11 TRANSACTION_ABORTABLE.
    assert stray_v10 == ErrorCode.INVALID_TXN_STATE
    assert stray_v11 == ErrorCode.TRANSACTION_ABORTABLE
    # Nothing was left open on partition 1: read_committed reaches its end.
    ends = end_offsets(broker.bootstrap, {TOPIC: 2}, READ_COMMITTED)
    assert ends[(TOPIC, 1)] == end_offsets(broker.bootstrap, {TOPIC: 2}, "read_uncommitted")[(TOPIC, 1)]


def test_a_late_write_of_an_aborted_transaction_does_not_open_a_new_one(broker: BrokerProcess) -> None:
    async def scenario(s: Session) -> tuple[ErrorCode, ErrorCode]:
        await s.add(0)
        first = await s.produce(0, b"aborted", 10)
        await s.end(committed=False)
        # EndTxn answers before the markers are written; a write before the marker would simply
        # join the aborted transaction. Wait until the abort marker is in.
        await asyncio.to_thread(wait_stable, broker.bootstrap, {TOPIC: 2})
        # A retry of a write that was in flight when the transaction was aborted, arriving late:
        # same producer, same epoch (the classic protocol does not bump it), the next sequence.
        late = await s.produce(0, b"late", 10)
        return first, late

    first, late = run(broker, scenario, "verify-late")
    assert first == ErrorCode.NONE
    assert late == ErrorCode.INVALID_TXN_STATE
    committed = end_offsets(broker.bootstrap, {TOPIC: 2}, READ_COMMITTED)
    everything = end_offsets(broker.bootstrap, {TOPIC: 2}, "read_uncommitted")
    assert committed[(TOPIC, 0)] == everything[(TOPIC, 0)]  # no transaction left hanging


def test_offsets_for_a_group_the_transaction_never_added_are_refused(broker: BrokerProcess) -> None:
    """The same check for TxnOffsetCommit: offsets of a group whose partition the transaction did
    not add (no AddOffsetsToTxn) would stay pending forever and hold the group's consumers back
    (OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT)."""

    async def scenario(s: Session) -> tuple[ErrorCode, ...]:
        await s.add(0)
        assert await s.produce(0, b"in", 10) == ErrorCode.NONE
        stray_v3 = await s.commit_offsets("verify-group", 3)
        stray_v4 = await s.commit_offsets("verify-group", 4)
        await s.add_offsets("verify-group")
        added = await s.commit_offsets("verify-group", 3)
        await s.end(committed=True)
        return stray_v3, stray_v4, added

    stray_v3, stray_v4, added = run(broker, scenario, "verify-offsets")
    assert stray_v3 == ErrorCode.INVALID_TXN_STATE
    assert stray_v4 == ErrorCode.TRANSACTION_ABORTABLE
    assert added == ErrorCode.NONE
