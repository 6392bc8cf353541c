"""The same produce / consume / admin scenario through four real Kafka clients.

kafka-python (pure Python), confluent-kafka (librdkafka), aiokafka (asyncio) and the kcat
command-line tool (librdkafka again, driven as a subprocess) each negotiate their own API
versions and build their own record batches, so a broker that passes all four speaks the
protocol the way clients in the wild expect.

Per client: create a 3-partition topic; produce keyed records with acks 0/1/all and every codec
(none, gzip, snappy, lz4, zstd), with headers, null keys and null values; read everything back
with manual partition assignment (no consumer group); compare partition order, keys, values,
headers, timestamps and acknowledged offsets exactly; look up offsets by timestamp and
earliest/latest; describe and alter a topic config; grow the topic to 5 partitions; delete it.
Admin steps use each client's own admin API; kcat, which has none, borrows confluent-kafka's.

Each client runs three times (issue #17): on the PLAINTEXT listener, over mutual TLS, and over
SASL_SSL with SCRAM-SHA-512 (kcat then on the librdkafka confluent-kafka ships: Debian's 2.0.2
cannot do SCRAM under OpenSSL 3, against Apache Kafka either).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import shutil
import subprocess
import tempfile
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
from support.brokers import BrokerProcess
from support.certs import TestPki
from support.client_security import PLAINTEXT, ClientSecurity
from support.clients import wait_until

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(180),
    # kafka-python 3.0.12 loads its protocol schemas through importlib.resources APIs that
    # Python deprecates; the noise says nothing about the broker.
    pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning"),
]

PARTITIONS = 3
# acks=0 last: its records are lost without a trace if sent before the new partitions have
# become writable on the broker (Kafka drops them with NOT_LEADER_OR_FOLLOWER), and acked
# produces before it prove the partitions are ready.
ACKS = ("all", "1", "0")
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
RECORDS_PER_COMBO = 10
DEFAULT_RETENTION_MS = "604800000"  # Kafka's default retention.ms (7 days)
NEW_RETENTION_MS = "3600000"
OP_TIMEOUT = 30.0


# --- the records every client produces ----------------------------------------------------------


@dataclass(frozen=True)
class Rec:
    """One record to produce. ``timestamp`` None means "let the producer stamp it"."""

    seq: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int | None
    acks: str
    codec: str


@dataclass(frozen=True)
class Got:
    """One record as a consumer returned it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int


def make_plan(
    *,
    explicit_timestamps: bool,
    per_record_headers: bool,
    null_key_and_value: bool,
    empty_values: bool,
    base_ts: int,
) -> list[Rec]:
    """150 records: 10 for each (acks, codec) pair, covering the record shapes that matter.

    Every record is identifiable from (key, value, headers) alone, because kcat cannot set
    per-record timestamps and so timestamps cannot identify its records.
    Keys and values avoid ':', tabs, ',' and '=' so kcat's line and header formats stay unambiguous.
    """
    plan: list[Rec] = []
    seq = itertools.count()
    for combo, (acks, codec) in enumerate(itertools.product(ACKS, CODECS)):
        combo_headers: tuple[tuple[str, bytes], ...] = ()
        if combo % 2 == 0:
            # A repeated header key and an empty header value are legal and must survive as is.
            # The combo number makes this combo's key-less, value-less record unique.
            combo_headers = (
                ("origin", b"matrix"),
                ("combo", str(combo).encode()),
                ("dup", b"1"),
                ("dup", b"2"),
                ("empty", b""),
            )
        for j in range(RECORDS_PER_COMBO):
            n = next(seq)
            headers = combo_headers
            key: bytes | None = f"key-{n % 4}".encode()
            # Repetitive text so that the codecs really compress; varying lengths.
            value: bytes | None = (f"v{n:05d}-" + "compressible-" * (n % 7 * 5)).encode()
            if j == 6:
                key = None
            elif j == 7:
                key, value = f"tomb-{n}".encode(), None
            elif j == 8 and combo_headers:
                # kafka-python and aiokafka refuse a record with neither key nor value; they
                # send an empty (not null) value instead, another shape worth covering.
                key, value = None, (None if null_key_and_value else b"")
            elif j == 8:
                # kcat's -Z (needed for null keys and values) also turns an empty value into null.
                key, value = f"empty-{n}".encode(), (b"" if empty_values else None)
            elif j == 9:
                value = (f"v{n:05d}-big-" + "0123456789abcdef" * 1280).encode()  # ~20 KiB
            if per_record_headers and j % 3 == 0:
                headers = headers + (("seq", str(n).encode()),)
            ts = base_ts + n * 10 if explicit_timestamps else None
            plan.append(Rec(n, key, value, headers, ts, acks, codec))
    identities = [(r.key, r.value, r.headers) for r in plan]
    assert len(set(identities)) == len(identities), "plan records must be distinguishable"
    return plan


# --- one driver per client ----------------------------------------------------------------------


class Driver(Protocol):
    name: str
    explicit_timestamps: bool
    per_record_headers: bool
    null_key_and_value: bool
    empty_values: bool

    def create_topic(self, topic: str, partitions: int) -> None: ...
    def produce(self, topic: str, recs: Sequence[Rec], acks: str, codec: str) -> dict[int, tuple[int, int]]: ...
    def consume(self, topic: str, end_offsets: Mapping[int, int]) -> list[Got]: ...
    def offsets_for_times(self, topic: str, targets: Mapping[int, int]) -> dict[int, int | None]: ...
    def earliest_latest(self, topic: str, partitions: Sequence[int]) -> tuple[dict[int, int], dict[int, int]]: ...
    def get_config(self, topic: str, name: str) -> str | None: ...
    def set_config(self, topic: str, name: str, value: str) -> None: ...
    def add_partitions(self, topic: str, total: int) -> None: ...
    def partition_count(self, topic: str) -> int | None: ...
    def topics(self) -> set[str]: ...
    def delete_topic(self, topic: str) -> None: ...
    def close(self) -> None: ...


def _deadline(seconds: float = OP_TIMEOUT) -> float:
    return time.monotonic() + seconds


class KafkaPythonDriver:
    name = "kafka-python"
    explicit_timestamps = True
    per_record_headers = True
    null_key_and_value = False  # send() raises "Need at least one: key or value"
    empty_values = True

    def __init__(self, bootstrap: str, security: ClientSecurity = PLAINTEXT) -> None:
        from kafka.admin import KafkaAdminClient

        self.bootstrap = bootstrap
        self.client_id = "matrix-kafka-python"
        self.security = security.kafka_python()
        self.admin = KafkaAdminClient(
            bootstrap_servers=bootstrap, client_id=self.client_id, request_timeout_ms=30000, **self.security
        )

    def _consumer(self) -> Any:
        from kafka import KafkaConsumer

        return KafkaConsumer(
            **self.security,
            bootstrap_servers=self.bootstrap,
            client_id=self.client_id,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            request_timeout_ms=30000,
        )

    def create_topic(self, topic: str, partitions: int) -> None:
        from kafka.admin import NewTopic

        response = self.admin.create_topics([NewTopic(topic, partitions, 1)], timeout_ms=30000)
        _assert_no_topic_errors(response)

    def produce(self, topic: str, recs: Sequence[Rec], acks: str, codec: str) -> dict[int, tuple[int, int]]:
        from kafka import KafkaProducer

        producer = KafkaProducer(
            **self.security,
            bootstrap_servers=self.bootstrap,
            client_id=self.client_id,
            acks=0 if acks == "0" else (1 if acks == "1" else "all"),
            compression_type=None if codec == "none" else codec,
            linger_ms=20,
            # Right after CreateTopics a partition may briefly answer NOT_LEADER_OR_FOLLOWER; a
            # retried batch must not overtake the next one (that would be the client reordering).
            max_in_flight_requests_per_connection=1,
        )
        try:
            futures = [
                (
                    r.seq,
                    producer.send(
                        topic,
                        key=r.key,
                        value=r.value,
                        headers=list(r.headers),
                        timestamp_ms=r.timestamp,
                    ),
                )
                for r in recs
            ]
            producer.flush(timeout=OP_TIMEOUT)
            acked = {}
            for seq, fut in futures:
                meta = fut.get(timeout=OP_TIMEOUT)
                acked[seq] = (meta.partition, meta.offset)
        finally:
            producer.close(timeout=10)
        return acked

    def consume(self, topic: str, end_offsets: Mapping[int, int]) -> list[Got]:
        from kafka import TopicPartition

        consumer = self._consumer()
        out: list[Got] = []
        try:
            tps = [TopicPartition(topic, p) for p in end_offsets]
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            deadline = _deadline()
            while any(consumer.position(tp) < end_offsets[tp.partition] for tp in tps):
                assert time.monotonic() < deadline, f"timed out consuming; have {len(out)}"
                for tp, msgs in consumer.poll(timeout_ms=500).items():
                    for m in msgs:
                        assert m.timestamp_type == 0, "expected CreateTime"
                        out.append(
                            Got(tp.partition, m.offset, m.key, m.value,
                                tuple((k, v) for k, v in m.headers), m.timestamp)
                        )
        finally:
            consumer.close()
        return out

    def offsets_for_times(self, topic: str, targets: Mapping[int, int]) -> dict[int, int | None]:
        from kafka import TopicPartition

        consumer = self._consumer()
        try:
            found = consumer.offsets_for_times({TopicPartition(topic, p): ts for p, ts in targets.items()})
        finally:
            consumer.close()
        return {tp.partition: (None if ot is None else ot.offset) for tp, ot in found.items()}

    def earliest_latest(self, topic: str, partitions: Sequence[int]) -> tuple[dict[int, int], dict[int, int]]:
        from kafka import TopicPartition

        consumer = self._consumer()
        try:
            tps = [TopicPartition(topic, p) for p in partitions]
            first = consumer.beginning_offsets(tps)
            last = consumer.end_offsets(tps)
        finally:
            consumer.close()
        return ({tp.partition: o for tp, o in first.items()}, {tp.partition: o for tp, o in last.items()})

    def get_config(self, topic: str, name: str) -> str | None:
        from kafka.admin import ConfigResource, ConfigResourceType

        result = self.admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, configs={name: None})], config_filter="all"
        )
        entry = result["topic"][topic].get(name)
        return None if entry is None else entry["value"]

    def set_config(self, topic: str, name: str, value: str) -> None:
        from kafka.admin import ConfigResource, ConfigResourceType

        result = self.admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={name: value})])
        assert result["topic"][topic] == "OK", result

    def add_partitions(self, topic: str, total: int) -> None:
        from kafka.admin import NewPartitions

        response = self.admin.create_partitions({topic: NewPartitions(total)}, timeout_ms=30000)
        for res in response.results:
            assert res.error_code == 0, response

    def partition_count(self, topic: str) -> int | None:
        for t in self.admin.describe_topics([topic]):
            if t["name"] == topic and t["error_code"] == 0:
                return len(t["partitions"])
        return None

    def topics(self) -> set[str]:
        return set(self.admin.list_topics())

    def delete_topic(self, topic: str) -> None:
        response = self.admin.delete_topics([topic], timeout_ms=30000)
        for t in response["topics"]:
            assert t["error_code"] == 0, response

    def close(self) -> None:
        self.admin.close()


def _assert_no_topic_errors(response: Any) -> None:
    # kafka-python and aiokafka hand back the raw CreateTopics response; errors are per topic.
    errors = getattr(response, "topic_errors", None) or getattr(response, "topics", None) or []
    for entry in errors:
        code = entry[1] if isinstance(entry, tuple) else getattr(entry, "error_code", 0)
        assert code == 0, f"CreateTopics error: {response}"


class ConfluentDriver:
    name = "confluent-kafka"
    explicit_timestamps = True
    per_record_headers = True
    null_key_and_value = True
    empty_values = True

    def __init__(self, bootstrap: str, security: ClientSecurity = PLAINTEXT,
                 client_id: str = "matrix-confluent") -> None:
        from confluent_kafka.admin import AdminClient

        self.bootstrap = bootstrap
        self.client_id = client_id
        self.security = security.librdkafka()
        self.admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": client_id, "log_level": 3,
                                  **self.security})

    def create_topic(self, topic: str, partitions: int) -> None:
        from confluent_kafka.admin import NewTopic

        futures = self.admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=OP_TIMEOUT)
        futures[topic].result(timeout=OP_TIMEOUT)

    def produce(self, topic: str, recs: Sequence[Rec], acks: str, codec: str) -> dict[int, tuple[int, int]]:
        from confluent_kafka import Producer

        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "client.id": self.client_id,
                "acks": acks,
                "compression.type": codec,
                "linger.ms": 20,
                # As for kafka-python: a retried batch must not overtake the next one.
                "max.in.flight": 1,
                "log_level": 3,
                **self.security,
            }
        )
        acked: dict[int, tuple[int, int]] = {}
        errors: list[str] = []

        def report(seq: int) -> Any:
            def callback(err: Any, msg: Any) -> None:
                if err is not None:
                    errors.append(f"seq {seq}: {err}")
                else:
                    acked[seq] = (msg.partition(), msg.offset())

            return callback

        for r in recs:
            kwargs: dict[str, Any] = {"key": r.key, "value": r.value, "headers": list(r.headers)}
            if r.timestamp is not None:
                kwargs["timestamp"] = r.timestamp
            producer.produce(topic, on_delivery=report(r.seq), **kwargs)
        remaining = producer.flush(OP_TIMEOUT)
        assert remaining == 0, f"{remaining} records still queued after flush"
        assert not errors, errors
        return acked

    def consume(self, topic: str, end_offsets: Mapping[int, int]) -> list[Got]:
        from support.clients import consume_range

        per_partition = consume_range(
            self.bootstrap, topic, end_offsets, timeout=OP_TIMEOUT, conf={"client.id": self.client_id, **self.security}
        )
        return [
            Got(r.partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp)  # type: ignore[arg-type]
            for records in per_partition.values()
            for r in records
        ]

    def _list_offsets(self, topic: str, specs: Mapping[int, Any]) -> dict[int, int]:
        from confluent_kafka import TopicPartition

        futures = self.admin.list_offsets(
            {TopicPartition(topic, p): spec for p, spec in specs.items()}, request_timeout=OP_TIMEOUT
        )
        return {tp.partition: f.result(timeout=OP_TIMEOUT).offset for tp, f in futures.items()}

    def offsets_for_times(self, topic: str, targets: Mapping[int, int]) -> dict[int, int | None]:
        from confluent_kafka.admin import OffsetSpec

        found = self._list_offsets(topic, {p: OffsetSpec.for_timestamp(ts) for p, ts in targets.items()})
        return {p: (None if o < 0 else o) for p, o in found.items()}

    def earliest_latest(self, topic: str, partitions: Sequence[int]) -> tuple[dict[int, int], dict[int, int]]:
        from confluent_kafka.admin import OffsetSpec

        first = self._list_offsets(topic, {p: OffsetSpec.earliest() for p in partitions})
        last = self._list_offsets(topic, {p: OffsetSpec.latest() for p in partitions})
        return first, last

    def get_config(self, topic: str, name: str) -> str | None:
        from confluent_kafka.admin import ConfigResource

        futures = self.admin.describe_configs([ConfigResource("topic", topic)], request_timeout=OP_TIMEOUT)
        entries = next(iter(futures.values())).result(timeout=OP_TIMEOUT)
        entry = entries.get(name)
        return None if entry is None else entry.value

    def set_config(self, topic: str, name: str, value: str) -> None:
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

        resource = ConfigResource(
            "topic",
            topic,
            incremental_configs=[ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)],
        )
        futures = self.admin.incremental_alter_configs([resource], request_timeout=OP_TIMEOUT)
        for f in futures.values():
            f.result(timeout=OP_TIMEOUT)

    def add_partitions(self, topic: str, total: int) -> None:
        from confluent_kafka.admin import NewPartitions

        futures = self.admin.create_partitions([NewPartitions(topic, total)], operation_timeout=OP_TIMEOUT)
        futures[topic].result(timeout=OP_TIMEOUT)

    def partition_count(self, topic: str) -> int | None:
        meta = self.admin.list_topics(topic=topic, timeout=10).topics.get(topic)
        if meta is None or meta.error is not None:
            return None
        return len(meta.partitions)

    def topics(self) -> set[str]:
        return set(self.admin.list_topics(timeout=10).topics)

    def delete_topic(self, topic: str) -> None:
        futures = self.admin.delete_topics([topic], operation_timeout=OP_TIMEOUT)
        futures[topic].result(timeout=OP_TIMEOUT)

    def close(self) -> None:
        pass


class AioKafkaDriver:
    name = "aiokafka"
    explicit_timestamps = True
    per_record_headers = True
    null_key_and_value = False  # send() asserts "Need at least one: key or value"
    empty_values = True

    def __init__(self, bootstrap: str, security: ClientSecurity = PLAINTEXT) -> None:
        self.bootstrap = bootstrap
        self.client_id = "matrix-aiokafka"
        self.security = security

    # Each step runs in its own event loop (asyncio.run): the test itself is synchronous, and a
    # fresh loop per step keeps clients from leaking across steps.

    async def _admin_call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        from aiokafka.admin import AIOKafkaAdminClient

        client = AIOKafkaAdminClient(
            **self.security.aiokafka(), bootstrap_servers=self.bootstrap, client_id=self.client_id,
            request_timeout_ms=30000,
        )
        await client.start()
        try:
            return await getattr(client, method)(*args, **kwargs)
        finally:
            await client.close()

    def _admin(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return asyncio.run(asyncio.wait_for(self._admin_call(method, *args, **kwargs), OP_TIMEOUT))

    async def _with_consumer(self, fn: Any) -> Any:
        from aiokafka import AIOKafkaConsumer

        consumer = AIOKafkaConsumer(
            **self.security.aiokafka(), bootstrap_servers=self.bootstrap,
            client_id=self.client_id,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        try:
            return await fn(consumer)
        finally:
            await consumer.stop()

    def create_topic(self, topic: str, partitions: int) -> None:
        from aiokafka.admin import NewTopic

        response = self._admin("create_topics", [NewTopic(topic, partitions, 1)], timeout_ms=30000)
        _assert_no_topic_errors(response)

    def produce(self, topic: str, recs: Sequence[Rec], acks: str, codec: str) -> dict[int, tuple[int, int]]:
        from aiokafka import AIOKafkaProducer

        async def run() -> dict[int, tuple[int, int]]:
            producer = AIOKafkaProducer(
                **self.security.aiokafka(), bootstrap_servers=self.bootstrap,
                client_id=self.client_id,
                acks=0 if acks == "0" else (1 if acks == "1" else "all"),
                compression_type=None if codec == "none" else codec,
                linger_ms=20,
                # No in-flight setting needed: aiokafka mutes a partition while its batch is in
                # flight, so retries cannot reorder.
            )
            await producer.start()
            try:
                futures = [
                    (
                        r.seq,
                        await producer.send(
                            topic, key=r.key, value=r.value, headers=list(r.headers), timestamp_ms=r.timestamp
                        ),
                    )
                    for r in recs
                ]
                await producer.flush()
                acked = {}
                for seq, fut in futures:
                    meta = await fut
                    if meta is not None:  # acks=0 futures resolve to None
                        acked[seq] = (meta.partition, meta.offset)
                return acked
            finally:
                # aiokafka closes TLS politely and waits for the broker's close_notify; Kafka sends
                # none on a connection that only ever carried acks=0 produces, so the close would
                # wait out asyncio's 30 s shutdown timeout. Everything was flushed already.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(producer.stop(), 5 if self.security.tls and acks == "0" else None)

        return asyncio.run(asyncio.wait_for(run(), OP_TIMEOUT))

    def consume(self, topic: str, end_offsets: Mapping[int, int]) -> list[Got]:
        from aiokafka import TopicPartition

        async def run(consumer: Any) -> list[Got]:
            tps = [TopicPartition(topic, p) for p in end_offsets]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            out: list[Got] = []
            while True:
                positions = {tp: await consumer.position(tp) for tp in tps}
                if all(positions[tp] >= end_offsets[tp.partition] for tp in tps):
                    return out
                batches = await consumer.getmany(*tps, timeout_ms=500)
                for tp, msgs in batches.items():
                    for m in msgs:
                        assert m.timestamp_type == 0, "expected CreateTime"
                        out.append(Got(tp.partition, m.offset, m.key, m.value, tuple(m.headers), m.timestamp))

        return asyncio.run(asyncio.wait_for(self._with_consumer(run), OP_TIMEOUT))

    def offsets_for_times(self, topic: str, targets: Mapping[int, int]) -> dict[int, int | None]:
        from aiokafka import TopicPartition

        async def run(consumer: Any) -> dict[int, int | None]:
            found = await consumer.offsets_for_times({TopicPartition(topic, p): ts for p, ts in targets.items()})
            return {tp.partition: (None if ot is None else ot.offset) for tp, ot in found.items()}

        return asyncio.run(asyncio.wait_for(self._with_consumer(run), OP_TIMEOUT))

    def earliest_latest(self, topic: str, partitions: Sequence[int]) -> tuple[dict[int, int], dict[int, int]]:
        from aiokafka import TopicPartition

        async def run(consumer: Any) -> tuple[dict[int, int], dict[int, int]]:
            tps = [TopicPartition(topic, p) for p in partitions]
            first = await consumer.beginning_offsets(tps)
            last = await consumer.end_offsets(tps)
            return ({tp.partition: o for tp, o in first.items()}, {tp.partition: o for tp, o in last.items()})

        return asyncio.run(asyncio.wait_for(self._with_consumer(run), OP_TIMEOUT))

    def get_config(self, topic: str, name: str) -> str | None:
        from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

        responses = self._admin(
            "describe_configs", [ConfigResource(ConfigResourceType.TOPIC, topic, configs={name: None})]
        )
        for response in responses:
            for error_code, _msg, _rtype, rname, entries in response.resources:
                assert error_code == 0, response
                for entry in entries:
                    if rname == topic and entry[0] == name:
                        return str(entry[1])
        return None

    def set_config(self, topic: str, name: str, value: str) -> None:
        from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

        # aiokafka only has the legacy AlterConfigs API (it replaces the topic's whole dynamic
        # config), which is fine here: the topic has no other overrides.
        responses = self._admin(
            "alter_configs", [ConfigResource(ConfigResourceType.TOPIC, topic, configs={name: value})]
        )
        for response in responses:
            for resource in response.resources:
                assert resource[0] == 0, response

    def add_partitions(self, topic: str, total: int) -> None:
        from aiokafka.admin import NewPartitions

        response = self._admin("create_partitions", {topic: NewPartitions(total)}, timeout_ms=30000)
        for entry in response.topic_errors:
            assert entry[1] == 0, response

    def partition_count(self, topic: str) -> int | None:
        for t in self._admin("describe_topics", [topic]):
            if t["topic"] == topic and t["error_code"] == 0:
                return len(t["partitions"])
        return None

    def topics(self) -> set[str]:
        return set(self._admin("list_topics"))

    def delete_topic(self, topic: str) -> None:
        response = self._admin("delete_topics", [topic], timeout_ms=30000)
        for entry in response.topic_error_codes:
            assert entry[1] == 0, response

    def close(self) -> None:
        pass


class KcatDriver:
    """kcat (librdkafka's CLI) for produce, consume, offset queries and metadata.

    kcat has no topic administration, so create/config/partition/delete steps use
    confluent-kafka's AdminClient (a different client id marks them in broker logs). Its
    config change uses the legacy AlterConfigs API so both APIs get exercised by the matrix.
    """

    name = "kcat"
    explicit_timestamps = False  # kcat's producer cannot set record timestamps
    per_record_headers = False  # -H headers apply to every record of one kcat run
    null_key_and_value = True
    empty_values = False  # -Z sends an empty value as null

    FORMAT = "%p\t%o\t%K\t%k\t%S\t%s\t%T\t%h\n"

    def __init__(self, bootstrap: str, security: ClientSecurity = PLAINTEXT) -> None:
        exe = shutil.which("kcat")
        # A missing tool must fail the test, never skip it.
        assert exe is not None, "kcat is not installed (Debian: apt-get install -y kcat)"
        self.exe = exe
        self.bootstrap = bootstrap
        self.client_id = "matrix-kcat"
        self.security = security.kcat_args()
        self.env = security.kcat_env(Path(tempfile.gettempdir()) / "riverlog-kcat-librdkafka")
        self.admin = ConfluentDriver(bootstrap, security, client_id="matrix-kcat-admin")

    def _run(self, args: Sequence[str], stdin: str | None = None, timeout: float = OP_TIMEOUT) -> str:
        cmd = [self.exe, "-b", self.bootstrap, "-X", f"client.id={self.client_id}", *self.security, *args]
        proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout, env=self.env)
        assert proc.returncode == 0, f"{cmd} exited {proc.returncode}\nstderr:\n{proc.stderr[-4000:]}"
        assert "ERROR" not in proc.stderr, f"{cmd} reported errors:\n{proc.stderr[-4000:]}"
        return proc.stdout

    def create_topic(self, topic: str, partitions: int) -> None:
        self.admin.create_topic(topic, partitions)

    def produce(self, topic: str, recs: Sequence[Rec], acks: str, codec: str) -> dict[int, tuple[int, int]]:
        # One kcat run per (acks, codec) group, whose records share their headers by design.
        # Lines are "key:value"; with -Z an empty key or value is sent as NULL.
        headers = {r.headers for r in recs}
        assert len(headers) == 1, "kcat sets the same -H headers on every record of a run"
        lines = "".join(f"{(r.key or b'').decode()}:{(r.value or b'').decode()}\n" for r in recs)
        args = ["-P", "-t", topic, "-K", ":", "-Z", "-X", f"acks={acks}", "-X", f"compression.codec={codec}",
                "-X", "max.in.flight=1"]  # retries must not reorder (see ConfluentDriver)
        for hk, hv in headers.pop():
            args += ["-H", f"{hk}={hv.decode()}"]
        self._run(args, stdin=lines)
        return {}  # kcat does not report partitions or offsets of what it produced

    def consume(self, topic: str, end_offsets: Mapping[int, int]) -> list[Got]:
        # -e: exit once every partition reaches its end; -Z: print NULL for null key/value, and
        # %K/%S (lengths, -1 for null) tell NULL from the literal text.
        out = self._run(["-C", "-t", topic, "-o", "beginning", "-e", "-q", "-Z", "-f", self.FORMAT])
        got: list[Got] = []
        for line in out.splitlines():
            p, o, klen, k, vlen, v, ts, hdrs = line.split("\t")
            headers: list[tuple[str, bytes]] = []
            if hdrs:
                for item in hdrs.split(","):
                    hk, _, hv = item.partition("=")
                    headers.append((hk, hv.encode()))
            got.append(
                Got(
                    int(p),
                    int(o),
                    None if int(klen) < 0 else k.encode(),
                    None if int(vlen) < 0 else v.encode(),
                    tuple(headers),
                    int(ts),
                )
            )
        return got

    def _query(self, topic: str, targets: Mapping[int, int]) -> dict[int, int]:
        # kcat -Q takes one timestamp per partition per run; -2 = earliest, -1 = latest.
        args = ["-Q", "-J"]
        for p, ts in targets.items():
            args += ["-t", f"{topic}:{p}:{ts}"]
        answer = json.loads(self._run(args))
        return {int(k): int(v["offset"]) for k, v in answer[topic].items() if k != "topic"}

    def offsets_for_times(self, topic: str, targets: Mapping[int, int]) -> dict[int, int | None]:
        return {p: (None if o < 0 else o) for p, o in self._query(topic, targets).items()}

    def earliest_latest(self, topic: str, partitions: Sequence[int]) -> tuple[dict[int, int], dict[int, int]]:
        return self._query(topic, dict.fromkeys(partitions, -2)), self._query(topic, dict.fromkeys(partitions, -1))

    def get_config(self, topic: str, name: str) -> str | None:
        return self.admin.get_config(topic, name)

    def set_config(self, topic: str, name: str, value: str) -> None:
        from confluent_kafka.admin import ConfigResource

        futures = self.admin.admin.alter_configs(
            [ConfigResource("topic", topic, set_config={name: value})], request_timeout=OP_TIMEOUT
        )
        for f in futures.values():
            f.result(timeout=OP_TIMEOUT)

    def add_partitions(self, topic: str, total: int) -> None:
        self.admin.add_partitions(topic, total)

    def _metadata(self) -> dict[str, Any]:
        return {t["topic"]: t for t in json.loads(self._run(["-L", "-J"]))["topics"]}

    def partition_count(self, topic: str) -> int | None:
        meta = self._metadata().get(topic)
        if meta is None or meta.get("error"):
            return None
        return len(meta["partitions"])

    def topics(self) -> set[str]:
        return set(self._metadata())

    def delete_topic(self, topic: str) -> None:
        self.admin.delete_topic(topic)

    def close(self) -> None:
        pass


DRIVERS = {
    "kafka-python": KafkaPythonDriver,
    "confluent-kafka": ConfluentDriver,
    "aiokafka": AioKafkaDriver,
    "kcat": KcatDriver,
}


# --- checks ---------------------------------------------------------------------------------------


def first_offset_at_or_after(records: Sequence[Got], ts: int) -> int | None:
    """What ListOffsets by timestamp must answer: the lowest offset whose timestamp >= ts."""
    offsets = [g.offset for g in records if g.timestamp >= ts]
    return min(offsets) if offsets else None


def check_consumed(
    plan: Sequence[Rec],
    got: Sequence[Got],
    acked: Mapping[int, tuple[int, int]],
    latest: Mapping[int, int],
    produce_window: tuple[int, int],
) -> dict[int, list[Got]]:
    by_identity = {(r.key, r.value, r.headers): r for r in plan}
    per_partition: dict[int, list[Got]] = defaultdict(list)
    seen: dict[int, Got] = {}
    for g in got:
        rec = by_identity.get((g.key, g.value, g.headers))
        assert rec is not None, f"consumed a record that was never produced: {g}"
        assert rec.seq not in seen, f"record seq {rec.seq} consumed twice: {seen[rec.seq]} and {g}"
        seen[rec.seq] = g
        per_partition[g.partition].append(g)
        if rec.timestamp is not None:
            assert g.timestamp == rec.timestamp, f"timestamp of seq {rec.seq}: {g.timestamp} != {rec.timestamp}"
        else:
            lo, hi = produce_window
            assert lo <= g.timestamp <= hi, f"producer-stamped timestamp {g.timestamp} outside [{lo}, {hi}]"
        if rec.seq in acked and rec.acks != "0":
            assert (g.partition, g.offset) == acked[rec.seq], (
                f"seq {rec.seq} acknowledged at {acked[rec.seq]} but consumed at {(g.partition, g.offset)}"
            )
    missing = sorted({r.seq for r in plan} - set(seen))
    assert not missing, f"records never consumed (acks of each: {[plan[s].acks for s in missing]}): {missing}"

    for p in latest:
        records = per_partition.get(p, [])
        offsets = [g.offset for g in records]
        assert offsets == list(range(latest[p])), f"partition {p}: offsets {offsets} not 0..{latest[p] - 1}"
        seqs = [by_identity[(g.key, g.value, g.headers)].seq for g in records]
        # One producer at a time, each waited for before the next, one request in flight: each
        # partition holds its records in the order they were produced.
        assert seqs == sorted(seqs), f"partition {p}: records out of produce order: {seqs}"
    key_partitions: dict[bytes, set[int]] = defaultdict(set)
    for g in got:
        if g.key is not None:
            key_partitions[g.key].add(g.partition)
    split = {k: ps for k, ps in key_partitions.items() if len(ps) > 1}
    assert not split, f"records of one key landed in several partitions: {split}"
    return per_partition


def _arrived(driver: Driver, topic: str, partitions: Sequence[int], count: int) -> dict[int, int] | None:
    _, last = driver.earliest_latest(topic, partitions)
    return last if sum(last.values()) >= count else None


# --- the test -----------------------------------------------------------------------------------


@pytest.fixture(params=["plaintext", "mtls", "sasl_ssl_scram"])
def secured(request: pytest.FixtureRequest, broker_factory, tmp_path) -> tuple[BrokerProcess, str, ClientSecurity]:
    """Where the client connects and how: the broker's PLAINTEXT listener, a mutual-TLS one
    (the client presents a certificate the broker's truststore signs), or SASL_SSL with a
    SCRAM-SHA-512 user made through the Admin API (issue #17)."""
    if request.param == "plaintext":
        broker = broker_factory()
        return broker, broker.bootstrap, PLAINTEXT
    pki = TestPki.create(tmp_path / "pki")
    if request.param == "sasl_ssl_scram":
        return _scram_listener(broker_factory, pki)
    broker = broker_factory(start=False, overrides={
        "listener.name.mtls.ssl.keystore.type": "PEM",
        "listener.name.mtls.ssl.keystore.location": str(pki.broker_keystore),
        "listener.name.mtls.ssl.truststore.type": "PEM",
        "listener.name.mtls.ssl.truststore.location": str(pki.truststore),
        "listener.name.mtls.ssl.client.auth": "required",
    })
    port = broker.add_listener("MTLS", "SSL", advertised_host="localhost")
    broker.start()
    client = pki.client("matrix-client")
    return broker, f"localhost:{port}", ClientSecurity("SSL", ca=pki.truststore, cert=client.cert, key=client.key,
                                                       keystore=client.keystore)


def _scram_listener(broker_factory, pki: TestPki) -> tuple[BrokerProcess, str, ClientSecurity]:
    broker = broker_factory(start=False, overrides={
        "listener.name.scram.ssl.keystore.type": "PEM",
        "listener.name.scram.ssl.keystore.location": str(pki.broker_keystore),
        "listener.name.scram.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.scram.scram-sha-512.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
    })
    port = broker.add_listener("SCRAM", "SASL_SSL", advertised_host="localhost")
    broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    upsert = UserScramCredentialUpsertion("matrix", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                          b"matrix-secret")
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(OP_TIMEOUT)
    security = ClientSecurity("SASL_SSL", ca=pki.truststore, mechanism="SCRAM-SHA-512", username="matrix",
                              password="matrix-secret")
    bootstrap = f"localhost:{port}"

    def logs_in() -> bool:
        probe = AdminClient({"bootstrap.servers": bootstrap, **security.librdkafka(), "log_level": 0})
        try:
            probe.list_topics(timeout=5)
            return True
        except KafkaException:
            return False

    # The credential reaches the listener through the metadata log.
    wait_until(logs_in, timeout=OP_TIMEOUT, message="the SCRAM user logs in")
    return broker, bootstrap, security


@pytest.mark.parametrize("client", list(DRIVERS))
def test_client_roundtrip_and_admin(secured: tuple[BrokerProcess, str, ClientSecurity], client: str) -> None:
    broker, bootstrap, security = secured
    driver: Driver = DRIVERS[client](bootstrap, security)
    topic = f"matrix-{client}"
    partitions = list(range(PARTITIONS))
    try:
        # Create, then wait until the client's own metadata shows the partitions.
        driver.create_topic(topic, PARTITIONS)
        wait_until(lambda: driver.partition_count(topic) == PARTITIONS, timeout=OP_TIMEOUT,
                   message=f"{client}: {topic} with {PARTITIONS} partitions in metadata")

        base_ts = int(time.time() * 1000) - 3_600_000  # an hour ago: well inside retention
        plan = make_plan(
            explicit_timestamps=driver.explicit_timestamps,
            per_record_headers=driver.per_record_headers,
            null_key_and_value=driver.null_key_and_value,
            empty_values=driver.empty_values,
            base_ts=base_ts,
        )

        window_start = int(time.time() * 1000) - 1000
        acked: dict[int, tuple[int, int]] = {}
        produced = 0
        latest: dict[int, int] = {}
        for (acks, codec), group in itertools.groupby(plan, key=lambda r: (r.acks, r.codec)):
            recs = list(group)
            result = driver.produce(topic, recs, acks, codec)
            if acks != "0" and client != "kcat":
                assert set(result) == {r.seq for r in recs}, f"acks={acks} {codec}: not all acknowledged"
                assert all(o >= 0 for _, o in result.values()), result
            acked.update(result)
            produced += len(recs)
            # acks=0 gives no confirmation, and the next producer's connection may be served
            # before this one's: wait until the log end offsets account for every record sent
            # so far, which both checks that they all arrived and keeps produce order.
            latest = wait_until(
                functools.partial(_arrived, driver, topic, partitions, produced),
                timeout=OP_TIMEOUT,
                message=f"{client}: {produced} records logged after acks={acks} {codec}",
            )
        window_end = int(time.time() * 1000) + 1000
        assert sum(latest.values()) == len(plan), f"more records in the log than produced: {latest}"
        earliest, _ = driver.earliest_latest(topic, partitions)
        assert earliest == dict.fromkeys(partitions, 0), earliest

        got = driver.consume(topic, latest)
        per_partition = check_consumed(plan, got, acked, latest, (window_start, window_end))

        # Offsets by timestamp: before everything, exactly at / just after a middle record, and
        # after everything; expected answers derived from what was consumed.
        all_ts = [g.timestamp for g in got]
        queries: list[dict[int, int]] = [
            dict.fromkeys(partitions, min(all_ts) - 1),
            dict.fromkeys(partitions, max(all_ts) + 1),
        ]
        for delta in (0, 1):
            q = {}
            for p in partitions:
                records = per_partition.get(p, [])
                if records:
                    q[p] = records[len(records) // 2].timestamp + delta
            queries.append(q)
        for q in queries:
            answer = driver.offsets_for_times(topic, q)
            expected = {p: first_offset_at_or_after(per_partition.get(p, []), ts) for p, ts in q.items()}
            assert answer == expected, f"offsets_for_times({q}) = {answer}, expected {expected}"

        # Topic configs: Kafka's default, then a change that a new describe must show.
        assert driver.get_config(topic, "retention.ms") == DEFAULT_RETENTION_MS
        driver.set_config(topic, "retention.ms", NEW_RETENTION_MS)
        wait_until(lambda: driver.get_config(topic, "retention.ms") == NEW_RETENTION_MS,
                   timeout=OP_TIMEOUT, message=f"{client}: retention.ms altered")

        driver.add_partitions(topic, 5)
        wait_until(lambda: driver.partition_count(topic) == 5, timeout=OP_TIMEOUT,
                   message=f"{client}: {topic} grown to 5 partitions")

        driver.delete_topic(topic)
        wait_until(lambda: topic not in driver.topics(), timeout=OP_TIMEOUT,
                   message=f"{client}: {topic} gone after delete")
        broker.assert_alive()
    finally:
        driver.close()
