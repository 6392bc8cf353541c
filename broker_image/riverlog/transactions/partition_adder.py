"""A partition leader asking a transaction coordinator about a producer's transaction (KIP-890):
transaction version 2's implicit AddPartitionsToTxn (part 2), and the verification that a
classic producer's transaction includes the partition (part 1, :meth:`PartitionAdder.verify`).

A version 2 producer never adds partitions itself. Before a partition leader appends the first
transactional batch of a producer's transaction (Produce v12+), and before a group coordinator
writes transactional offsets (TxnOffsetCommit v5), the broker has the partition added to the
transaction at the producer's transaction coordinator: AddPartitionsToTxn v5 with
``verify_only`` false, as Kafka's ``AddPartitionsToTxnManager`` sends it. The coordinator is the
leader of the id's ``__transaction_state`` partition in the metadata image; this broker's own
coordinator is called in-process, others over one inter-broker connection each (opened on first
use, dropped on error).

CONCURRENT_TRANSACTIONS (the previous transaction's markers are still being written) is retried
here for a short while, as Kafka does (``add.partitions.to.txn.retry.backoff.ms`` 20 ms, for at
most ``add.partitions.to.txn.retry.backoff.max.ms`` 100 ms), then passed on: the client retries
it. The coordinator's availability errors become :data:`UNAVAILABLE` for the caller to name in
its own API's terms.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from ..client.connection import BrokerConnection
from ..client.errors import ClientError
from ..controller.image import MetadataImage
from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode
from ..security.client_config import ClientSecurity
from .placement import TRANSACTION_STATE_TOPIC, partition_for
from .state import TopicPartition

log = logging.getLogger("riverlog.transactions.adder")

# This broker's coordinator: (transactional id, producer id, epoch, partitions) -> error code.
LocalAdd = Callable[[str, int, int, Sequence[TopicPartition]], Awaitable[ErrorCode]]
# ... and its verification: the same in, an error code per partition out.
LocalVerify = Callable[[str, int, int, Sequence[TopicPartition]], dict[TopicPartition, ErrorCode]]

ADD_VERSION = 5  # brokers send 4+; 5 knows TRANSACTION_ABORTABLE
RETRY_BACKOFF_S = 0.020
RETRY_WINDOW_S = 0.100
# The coordinator cannot be reached or is not ready: retriable for the producer.
UNAVAILABLE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                         ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})


class PartitionAdder:
    def __init__(self, node_id: int, image: Callable[[], MetadataImage], listener_name: str, local: LocalAdd,
                 request_timeout_s: float = 30.0, local_verify: LocalVerify | None = None,
                 security: ClientSecurity | None = None) -> None:
        self.node_id = node_id
        self.security = security
        self.image = image
        self.listener_name = listener_name
        self.local = local
        self.local_verify = local_verify
        self.request_timeout_s = request_timeout_s
        self._conns: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, asyncio.Lock] = {}

    async def add(self, transactional_id: str, producer_id: int, producer_epoch: int,
                  partitions: Sequence[TopicPartition], retry_window_s: float = RETRY_WINDOW_S) -> ErrorCode:
        """Add ``partitions`` to the producer's transaction; the coordinator's answer, with
        PRODUCER_FENCED as INVALID_PRODUCER_EPOCH (what a partition leader says of a fenced
        producer). CONCURRENT_TRANSACTIONS is retried for ``retry_window_s``."""
        started = time.monotonic()
        while True:
            code = await self._add_once(transactional_id, producer_id, producer_epoch, partitions)
            if code != ErrorCode.CONCURRENT_TRANSACTIONS or time.monotonic() - started >= retry_window_s:
                break
            await asyncio.sleep(RETRY_BACKOFF_S)
        return ErrorCode.INVALID_PRODUCER_EPOCH if code == ErrorCode.PRODUCER_FENCED else code

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: Sequence[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """KIP-890 part 1: does the producer's open transaction include these partitions?
        NONE for those it does; the coordinator's refusal (INVALID_TXN_STATE or
        TRANSACTION_ABORTABLE: not in the transaction; PRODUCER_FENCED as INVALID_PRODUCER_EPOCH)
        or its unavailability for the others. Reads only."""
        coordinator = self._coordinator_of(transactional_id)
        if coordinator is None:
            codes = dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        elif coordinator == self.node_id and self.local_verify is not None:
            codes = self.local_verify(transactional_id, producer_id, producer_epoch, partitions)
        else:
            codes = await self._remote(coordinator, transactional_id, producer_id, producer_epoch, partitions,
                                       verify_only=True)
        return {tp: ErrorCode.INVALID_PRODUCER_EPOCH if code == ErrorCode.PRODUCER_FENCED else code
                for tp, code in codes.items()}

    async def _add_once(self, transactional_id: str, producer_id: int, producer_epoch: int,
                        partitions: Sequence[TopicPartition]) -> ErrorCode:
        coordinator = self._coordinator_of(transactional_id)
        if coordinator is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if coordinator == self.node_id:
            return await self.local(transactional_id, producer_id, producer_epoch, partitions)
        codes = await self._remote(coordinator, transactional_id, producer_id, producer_epoch, partitions,
                                   verify_only=False)
        # One transaction, one decision: every partition gets the same code from the coordinator
        # (or OPERATION_NOT_ATTEMPTED beside the one that failed).
        failures = set(codes.values()) - {ErrorCode.NONE, ErrorCode.OPERATION_NOT_ATTEMPTED}
        return min(failures) if failures else ErrorCode.NONE

    async def _remote(self, coordinator: int, transactional_id: str, producer_id: int, producer_epoch: int,
                      partitions: Sequence[TopicPartition], *, verify_only: bool) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v5 to another broker: an error code per partition."""
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        body = {"transactions": [{
            "transactional_id": transactional_id, "producer_id": producer_id, "producer_epoch": producer_epoch,
            "verify_only": verify_only, "topics": [{"name": t, "partitions": p} for t, p in by_topic.items()]}]}
        try:
            conn = await self._connection(coordinator)
            response = await conn.request(ApiKey.ADD_PARTITIONS_TO_TXN, body, ADD_VERSION,
                                          timeout=self.request_timeout_s)
        except (ClientError, OSError, TimeoutError) as exc:
            log.debug("AddPartitionsToTxn to broker %d failed: %s", coordinator, exc)
            await self._drop(coordinator)
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        top = ErrorCode(response.get("error_code", 0))
        if top != ErrorCode.NONE:
            return dict.fromkeys(partitions, top)
        codes = {(t["name"], p["partition_index"]): ErrorCode(p["partition_error_code"])
                 for txn in response["results_by_transaction"] for t in txn["topic_results"]
                 for p in t["results_by_partition"]}
        return {tp: codes.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR) for tp in partitions}

    def _coordinator_of(self, transactional_id: str) -> int | None:
        image = self.image()
        topic = image.topics.get(TRANSACTION_STATE_TOPIC)
        if topic is None or not topic.partitions:
            return None
        part = topic.partitions.get(partition_for(transactional_id, len(topic.partitions)))
        return part.leader if part is not None and part.leader >= 0 else None

    async def _connection(self, broker_id: int) -> BrokerConnection:
        lock = self._connecting.setdefault(broker_id, asyncio.Lock())
        async with lock:
            conn = self._conns.get(broker_id)
            if conn is not None and not conn.closed:
                return conn
            broker = self.image().brokers.get(broker_id)
            endpoint = (broker.endpoint(self.listener_name) or broker.endpoint()) if broker is not None else None
            if endpoint is None:
                raise ClientError(f"broker {broker_id} has no endpoint")
            conn = await BrokerConnection.connect(endpoint.host, endpoint.port, client_id=f"broker-{self.node_id}",
                                                  connect_timeout=self.request_timeout_s,
                                                  request_timeout=self.request_timeout_s,
                                                  security=self.security)
            self._conns[broker_id] = conn
            return conn

    async def _drop(self, broker_id: int) -> None:
        conn = self._conns.pop(broker_id, None)
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()

    async def stop(self) -> None:
        for broker_id in list(self._conns):
            await self._drop(broker_id)
