"""The transaction coordinator's asyncio shell over real ``__transaction_state`` logs: producer
ids from the controller, writes acknowledged through the high watermark, markers handed to the
leader (here this broker, through a fake local WriteTxnMarkers writer) and retried, and a new
coordinator that reloads the partition and finishes what was left prepared; then the request
handlers over it (versions, error mapping, unknown partitions, verification)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from riverlog.controller.image import MetadataImage
from riverlog.controller.records import Endpoint, PartitionRecord, RegisterBrokerRecord, TopicRecord
from riverlog.handlers.producer_ids import handle_init_producer_id
from riverlog.handlers.transactions import (
    handle_add_offsets_to_txn,
    handle_add_partitions_to_txn,
    handle_describe_transactions,
    handle_end_txn,
    handle_list_transactions,
)
from riverlog.protocol.errors import ErrorCode, KafkaError
from riverlog.security.access import allow_all
from riverlog.transactions.config import TxnConfig
from riverlog.transactions.placement import TRANSACTION_STATE_TOPIC, partition_for
from riverlog.transactions.runtime import TransactionCoordinator
from riverlog.transactions.shard import TxnShard
from riverlog.transactions.state import TxnState
from support.coordinator_replicas import FakeReplicas

pytestmark = pytest.mark.unit

PARTITIONS = 3
NODE = 1
TXN_TOPIC_ID = uuid.uuid4()
DATA_TOPIC_ID = uuid.uuid4()
TID = "tx-runtime"
CONFIG = TxnConfig(topic_num_partitions=PARTITIONS, marker_retry_backoff_ms=1)


class FakeController:
    def __init__(self) -> None:
        records: list[Any] = [RegisterBrokerRecord(NODE, (Endpoint("PLAINTEXT", "localhost", 9092),)),
                              TopicRecord(TRANSACTION_STATE_TOPIC, TXN_TOPIC_ID), TopicRecord("data", DATA_TOPIC_ID)]
        records += [PartitionRecord(TXN_TOPIC_ID, i, (NODE,), (NODE,), NODE) for i in range(PARTITIONS)]
        records += [PartitionRecord(DATA_TOPIC_ID, i, (NODE,), (NODE,), NODE) for i in range(2)]
        self.image = MetadataImage(cluster_id="test").apply(records)
        self.next_id = 5000

    async def allocate_producer_id(self, broker_id: int) -> int:
        self.next_id += 1
        return self.next_id


class MarkerLeader:
    """This broker's WriteTxnMarkers, faked: records what it was asked, answers scripted errors."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.errors: list[ErrorCode] = []  # the next answers' error, for every partition

    async def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(body)
        code = self.errors.pop(0) if self.errors else ErrorCode.NONE
        return {"markers": [{"producer_id": m["producer_id"], "topics": [
            {"name": t["name"], "partitions": [{"partition_index": i, "error_code": code}
                                               for i in t["partition_indexes"]]}
            for t in m["topics"]]} for m in body["markers"]]}


async def started(directory: Path, leader: MarkerLeader) -> tuple[TransactionCoordinator, FakeReplicas]:
    replicas = FakeReplicas(directory, TRANSACTION_STATE_TOPIC, TXN_TOPIC_ID, PARTITIONS, NODE)
    coordinator = TransactionCoordinator(CONFIG, NODE, replicas, FakeController(), "PLAINTEXT",  # type: ignore[arg-type]
                                         local_markers=leader)
    coordinator.on_image(coordinator.image)
    for _ in range(100):
        if not coordinator.any_loading():
            break
        await asyncio.sleep(0.01)
    return coordinator, replicas


async def state_of(coordinator: TransactionCoordinator, until: TxnState) -> TxnState:
    shard = coordinator.shard_for(TID)
    for _ in range(200):
        if shard.txns[TID].state == until and shard.txns[TID].pending is None:
            break
        await asyncio.sleep(0.01)
    return shard.txns[TID].state


def test_a_transaction_end_to_end_and_reloaded(tmp_path: Path) -> None:
    async def scenario() -> None:
        leader = MarkerLeader()
        coordinator, replicas = await started(tmp_path, leader)
        init = await coordinator.init_producer_id(TID, 60_000, None)
        assert init == {"error_code": ErrorCode.NONE, "producer_id": 5001, "producer_epoch": 0}
        added = await coordinator.call(TID, lambda s, t: s.add_partitions(t, TID, 5001, 0, [("data", 0), ("data", 1)]))
        assert added == {"error_code": ErrorCode.NONE}
        leader.errors = [ErrorCode.NOT_LEADER_OR_FOLLOWER]  # the first attempt fails: retried
        ended = await coordinator.call(TID, lambda s, t: s.end_txn(t, TID, 5001, 0, True))
        assert ended == {"error_code": ErrorCode.NONE}
        assert await state_of(coordinator, TxnState.COMPLETE_COMMIT) == TxnState.COMPLETE_COMMIT
        assert len(leader.requests) == 2
        (marker,) = leader.requests[-1]["markers"]
        assert marker == {"producer_id": 5001, "producer_epoch": 0, "transaction_result": True,
                          "coordinator_epoch": 0, "transaction_version": 0,
                          "topics": [{"name": "data", "partition_indexes": [0, 1]}]}
        # The next transaction is left prepared by a coordinator that stops before its markers.
        await coordinator.call(TID, lambda s, t: s.add_partitions(t, TID, 5001, 0, [("data", 1)]))
        leader.errors = [ErrorCode.NOT_ENOUGH_REPLICAS] * 1000
        await coordinator.call(TID, lambda s, t: s.end_txn(t, TID, 5001, 0, False))
        assert coordinator.shard_for(TID).txns[TID].state == TxnState.PREPARE_ABORT
        await coordinator.stop()
        replicas.close()

        leader2 = MarkerLeader()
        reloaded, replicas2 = await started(tmp_path, leader2)
        assert await state_of(reloaded, TxnState.COMPLETE_ABORT) == TxnState.COMPLETE_ABORT
        (marker,) = leader2.requests[0]["markers"]
        assert marker["transaction_result"] is False
        assert marker["topics"] == [{"name": "data", "partition_indexes": [1]}]
        described = reloaded.shard_for(TID).describe(TID)
        assert (described["producer_id"], described["producer_epoch"], described["transaction_state"]) == (
            5001, 0, "CompleteAbort")
        await reloaded.stop()
        replicas2.close()

    asyncio.run(scenario())


def test_requests_for_partitions_not_led_here(tmp_path: Path) -> None:
    async def scenario() -> None:
        coordinator, replicas = await started(tmp_path, MarkerLeader())
        index = partition_for(TID, PARTITIONS)
        coordinator._unload(index)
        with pytest.raises(KafkaError) as raised:
            await coordinator.call(TID, lambda s, t: s.end_txn(t, TID, 1, 0, True))
        assert raised.value.code == ErrorCode.NOT_COORDINATOR
        assert all(isinstance(s, TxnShard) for s in coordinator.loaded_shards())
        await coordinator.stop()
        replicas.close()

    asyncio.run(scenario())


# The handlers over this coordinator ---------------------------------------------------------


class FakeGroups:
    def partition_for(self, group_id: str) -> int:
        return 0


class FakeHost:
    def __init__(self, coordinator: TransactionCoordinator) -> None:
        self.transactions = coordinator
        self.coordinator = FakeGroups()
        self.image = coordinator.image
        self.access = allow_all()


def ctx(version: int) -> Any:
    return SimpleNamespace(version=version)


def test_handlers_translate_versions_and_errors(tmp_path: Path) -> None:
    async def scenario() -> None:
        coordinator, replicas = await started(tmp_path, MarkerLeader())
        host: Any = FakeHost(coordinator)
        init = {"transactional_id": TID, "transaction_timeout_ms": 60_000, "producer_id": -1, "producer_epoch": -1}
        assert (await handle_init_producer_id(host, ctx(4), {**init, "transaction_timeout_ms": 900_001}))[
            "error_code"] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        assert (await handle_init_producer_id(host, ctx(4), {**init, "producer_id": 3}))[
            "error_code"] == ErrorCode.INVALID_REQUEST
        assert await handle_init_producer_id(host, ctx(4), init) == {
            "throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": 5001, "producer_epoch": 0}

        def add(version: int, epoch: int, topics: list[dict[str, Any]]) -> dict[str, Any]:
            return {"v3_and_below_transactional_id": TID, "v3_and_below_producer_id": 5001,
                    "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": topics}

        unknown = await handle_add_partitions_to_txn(host, ctx(3), add(3, 0, [
            {"name": "data", "partitions": [0]}, {"name": "nope", "partitions": [0]}]))
        assert unknown["results_by_topic_v3_and_below"] == [
            {"name": "data", "results_by_partition": [
                {"partition_index": 0, "partition_error_code": ErrorCode.OPERATION_NOT_ATTEMPTED}]},
            {"name": "nope", "results_by_partition": [
                {"partition_index": 0, "partition_error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}]}]
        for version, expected in ((1, ErrorCode.INVALID_PRODUCER_EPOCH), (2, ErrorCode.PRODUCER_FENCED)):
            fenced = await handle_add_partitions_to_txn(host, ctx(version), add(version, 9, [
                {"name": "data", "partitions": [1]}]))
            assert fenced["results_by_topic_v3_and_below"][0]["results_by_partition"][0][
                "partition_error_code"] == expected
        ok = await handle_add_partitions_to_txn(host, ctx(3), add(3, 0, [{"name": "data", "partitions": [1]}]))
        assert ok["results_by_topic_v3_and_below"][0]["results_by_partition"][0]["partition_error_code"] == 0
        verified = await handle_add_partitions_to_txn(host, ctx(4), {"transactions": [
            {"transactional_id": TID, "producer_id": 5001, "producer_epoch": 0, "verify_only": True,
             "topics": [{"name": "data", "partitions": [0, 1]}]}]})
        assert verified["results_by_transaction"] == [{"transactional_id": TID, "topic_results": [
            {"name": "data", "results_by_partition": [
                {"partition_index": 0, "partition_error_code": ErrorCode.INVALID_TXN_STATE},
                {"partition_index": 1, "partition_error_code": ErrorCode.NONE}]}]}]
        offsets = {"transactional_id": TID, "producer_id": 5001, "producer_epoch": 0, "group_id": "g"}
        assert (await handle_add_offsets_to_txn(host, ctx(3), offsets))["error_code"] == ErrorCode.NONE
        assert ("__consumer_offsets", 0) in coordinator.shard_for(TID).txns[TID].partitions

        described = await handle_describe_transactions(host, ctx(0), {"transactional_ids": [TID, "", "other"]})
        codes = [s["error_code"] for s in described["transaction_states"]]
        assert codes == [ErrorCode.NONE, ErrorCode.INVALID_REQUEST, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND]
        assert described["transaction_states"][0]["transaction_state"] == "Ongoing"
        listed = await handle_list_transactions(host, ctx(1), {
            "state_filters": ["Ongoing", "Bogus"], "producer_id_filters": [], "duration_filter": -1})
        assert listed["unknown_state_filters"] == ["Bogus"]
        assert listed["transaction_states"] == [{"transactional_id": TID, "producer_id": 5001,
                                                 "transaction_state": "Ongoing"}]

        end = {"transactional_id": TID, "producer_id": 5001, "producer_epoch": 0, "committed": True}
        assert (await handle_end_txn(host, ctx(3), {**end, "transactional_id": ""}))[
            "error_code"] == ErrorCode.INVALID_REQUEST
        assert (await handle_end_txn(host, ctx(1), {**end, "producer_epoch": 1}))[
            "error_code"] == ErrorCode.INVALID_PRODUCER_EPOCH
        assert (await handle_end_txn(host, ctx(3), end))["error_code"] == ErrorCode.NONE
        assert await state_of(coordinator, TxnState.COMPLETE_COMMIT) == TxnState.COMPLETE_COMMIT
        await coordinator.stop()
        replicas.close()

    asyncio.run(scenario())
