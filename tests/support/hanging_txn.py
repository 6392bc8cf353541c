"""A *hanging* transaction, made on purpose: transactional records on a partition that no
transaction coordinator knows of, so nothing will ever write their marker and read_committed
consumers stay held back at their first offset until an operator aborts them
(``kafka-transactions abort``, ``riverlog transactions abort``).

Made with raw requests: InitProducerId without a transactional id (a plain idempotent producer
id), then a Produce of one transactional batch of that producer, naming a transactional id that
was never initialized. Kafka 4.x and Riverlog refuse such a batch while
``transaction.partition.verification.enable`` (KIP-890 part 1) is on, which is what verification
is for, so the brokers of these tests run with :data:`HANGING_SETTINGS`.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from riverlog.client.cluster import Cluster
from riverlog.protocol.api_keys import ApiKey
from riverlog.protocol.errors import ErrorCode
from riverlog.protocol.record_batch.build import NewRecord, build_batch

HANGING_SETTINGS: dict[str, object] = {"transaction.partition.verification.enable": "false"}
# Named in the Produce request only; never initialized, so no coordinator knows it.
UNKNOWN_TRANSACTIONAL_ID = "riverlog-tests-hanging"
CLASSIC_PRODUCE_VERSION = 11


@dataclass(frozen=True)
class Hanging:
    producer_id: int
    producer_epoch: int
    start_offset: int  # offset of the transaction's first record on the partition


def make_hanging_transaction(bootstrap: str, topic: str, partition: int, values: list[str]) -> Hanging:
    """Write ``values`` as one open transactional batch on ``topic``/``partition`` that no
    coordinator knows of."""
    return asyncio.run(_make(bootstrap, topic, partition, values))


async def _make(bootstrap: str, topic: str, partition: int, values: list[str]) -> Hanging:
    async with Cluster(bootstrap, client_id="hanging-txn") as cluster:
        conn = await cluster.any_connection()
        init = await conn.request(ApiKey.INIT_PRODUCER_ID, {
            "transactional_id": None, "transaction_timeout_ms": -1, "producer_id": -1, "producer_epoch": -1})
        assert init["error_code"] == ErrorCode.NONE, init
        producer_id, epoch = init["producer_id"], init["producer_epoch"]
        now = int(time.time() * 1000)
        batch = build_batch([NewRecord(value=v.encode(), key=b"hanging", timestamp=now) for v in values],
                            producer_id=producer_id, producer_epoch=epoch, base_sequence=0, transactional=True)
        info = await cluster.topic(topic, refresh=True)
        part = info.partition(partition)
        assert part is not None and part.leader >= 0, info
        leader = await cluster.connection_to(part.leader)
        response = await leader.request(ApiKey.PRODUCE, {
            # Kafka takes transactional records only with a transactional id (else
            # TRANSACTIONAL_ID_AUTHORIZATION_FAILED); without verification it is not checked.
            "transactional_id": UNKNOWN_TRANSACTIONAL_ID, "acks": -1, "timeout_ms": 15_000,
            "topic_data": [{"name": topic, "topic_id": info.topic_id,
                            "partition_data": [{"index": partition, "records": batch}]}]},
            # Kafka 4.x has a transaction version 2 coordinator add the partition for Produce v12+
            # (which fails for an unknown id, INVALID_PRODUCER_ID_MAPPING); v11 is written as is.
            min(leader.version_for(ApiKey.PRODUCE), CLASSIC_PRODUCE_VERSION))
        (result,) = response["responses"][0]["partition_responses"]
        assert result["error_code"] == ErrorCode.NONE, result
        return Hanging(producer_id, epoch, result["base_offset"])
