"""SR2 (issue #20, acceptance 7): confluent-kafka's schema-registry serializers round-tripping
records through a topic, with Riverlog's registry: Avro, Protobuf and JSON Schema, each its own
topic and subject.

Per format, in the benchmark's own process: the serializer's first call (it registers the schema:
a POST to the registry, a write to ``_schemas``) is timed alone; then ``records`` records are
serialized and produced (librdkafka, linger 5 ms, acks=all) until the last is acknowledged;
then read back by one consumer assigned every partition and deserialized, the deserializer's
first call (it fetches the writer's schema by id) again timed alone; the read is timed from the
first record fetched. Every record read back must
equal the one sent. Reported: records/s of each half and of the whole round trip (records over
the two halves' time), the first calls in ms, and the mean cached serializer and deserializer
call in µs (the registry is not asked again: the client caches the schema and its id).

The client's CPU shares the machine with the broker and the registry: on two cores these rates
are the serializers' Python cost as much as the broker's.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

FORMATS = ("avro", "protobuf", "json")
TIMEOUT_S = 600.0

AVRO = {"type": "record", "name": "Order", "namespace": "bench", "fields": [
    {"name": "id", "type": "long"}, {"name": "customer", "type": "string"}, {"name": "amount", "type": "double"}]}
JSON_SCHEMA = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
               "properties": {"id": {"type": "integer"}, "customer": {"type": "string"},
                              "amount": {"type": "number"}},
               "required": ["id", "customer", "amount"], "additionalProperties": False}
PROTOBUF = {"use.deprecated.format": False}


def _order_class() -> type[Message]:
    """bench.Order (id int64 = 1, customer string = 2, amount double = 3), built at run time:
    there is no protoc here."""
    proto = descriptor_pb2.FileDescriptorProto(name="bench_order.proto", package="bench", syntax="proto3")
    message = proto.message_type.add(name="Order")
    kinds = descriptor_pb2.FieldDescriptorProto
    for name, number, kind in (("id", 1, kinds.TYPE_INT64), ("customer", 2, kinds.TYPE_STRING),
                               ("amount", 3, kinds.TYPE_DOUBLE)):
        message.field.add(name=name, number=number, type=kind, label=kinds.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    cls: type[Message] = message_factory.GetMessageClass(pool.FindMessageTypeByName("bench.Order"))
    return cls


Serde = Callable[[Any, SerializationContext], Any]


@dataclass(frozen=True)
class Format:
    """How one format makes its records, serializer and deserializer, and how a record read back
    compares with the one sent."""

    name: str
    make: Callable[[int, float], Any]  # (id, amount) -> the record the serializer takes
    serializer: Callable[[SchemaRegistryClient], Serde]
    deserializer: Callable[[SchemaRegistryClient], Serde]
    plain: Callable[[Any], tuple[int, str, float]]


def _dict_record(i: int, amount: float) -> dict[str, Any]:
    return {"id": i, "customer": f"customer-{i % 1000}", "amount": amount}


def _plain_dict(record: dict[str, Any]) -> tuple[int, str, float]:
    return record["id"], record["customer"], record["amount"]


def _formats() -> dict[str, Format]:
    order = _order_class()
    return {
        "avro": Format("avro", _dict_record, lambda c: AvroSerializer(c, json.dumps(AVRO)),
                       lambda c: AvroDeserializer(c), _plain_dict),
        "protobuf": Format("protobuf", lambda i, a: order(id=i, customer=f"customer-{i % 1000}", amount=a),
                           lambda c: ProtobufSerializer(order, c, PROTOBUF),
                           lambda c: ProtobufDeserializer(order, PROTOBUF, c),
                           lambda m: (m.id, m.customer, m.amount)),
        "json": Format("json", _dict_record, lambda c: JSONSerializer(json.dumps(JSON_SCHEMA), c),
                       lambda c: JSONDeserializer(json.dumps(JSON_SCHEMA), schema_registry_client=c), _plain_dict),
    }


def round_trip(bootstrap: str, url: str, fmt: str, topic: str, partitions: int, records: int,
               seed: int) -> dict[str, float]:
    """One format's round trip of ``records`` records through ``topic`` (already created)."""
    form = _formats()[fmt]
    rng = random.Random(seed)
    sent = [form.make(i, round(rng.uniform(1, 1000), 2)) for i in range(records)]
    context = SerializationContext(topic, MessageField.VALUE)
    client = SchemaRegistryClient({"url": url})

    serialize = form.serializer(client)
    started = time.perf_counter()
    first = serialize(sent[0], context)  # registers the schema
    first_serialize = time.perf_counter() - started
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", "log_level": 2})
    failed: list[Any] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failed.append(err)

    serialize_s = 0.0
    produce_started = time.perf_counter()
    producer.produce(topic, value=first, on_delivery=delivered)
    for record in sent[1:]:
        before = time.perf_counter()
        value = serialize(record, context)
        serialize_s += time.perf_counter() - before
        while True:
            try:
                producer.produce(topic, value=value, on_delivery=delivered)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.05)
        producer.poll(0)
    if producer.flush(TIMEOUT_S) or failed:
        raise AssertionError(f"{fmt}: {len(failed)} deliveries failed: {failed[:3]}")
    produce_s = time.perf_counter() - produce_started + first_serialize

    received, first_deserialize, deserialize_s, consume_s = _read_back(bootstrap, topic, partitions, records,
                                                                       form.deserializer(client), context)
    if sorted(map(form.plain, received)) != sorted(map(form.plain, sent)):
        raise AssertionError(f"{fmt}: the records read back are not the records sent")
    cached = max(1, records - 1)
    return {
        f"{fmt}_records_s": records / (produce_s + consume_s),
        f"{fmt}_produce_records_s": records / produce_s,
        f"{fmt}_consume_records_s": records / consume_s,
        f"{fmt}_first_serialize_ms": first_serialize * 1e3,
        f"{fmt}_cached_serialize_us": serialize_s / cached * 1e6,
        f"{fmt}_first_deserialize_ms": first_deserialize * 1e3,
        f"{fmt}_cached_deserialize_us": deserialize_s / cached * 1e6,
    }


def _read_back(bootstrap: str, topic: str, partitions: int, count: int, deserialize: Serde,
               context: SerializationContext) -> tuple[list[Any], float, float, float]:
    """(records, first deserializer call s, the other calls' s together, the read's s). The read
    is timed from the first fetched record: a fresh consumer's metadata and offset lookups (about
    half a second, whatever the format) are not the serializers' cost."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-serde-{topic}",
                         "enable.auto.commit": False, "log_level": 2, "fetch.wait.max.ms": 10})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    received: list[Any] = []
    first_s = rest_s = 0.0
    deadline = time.monotonic() + TIMEOUT_S
    started: float | None = None
    try:
        while len(received) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"read {len(received)} of {count} records of {topic}")
            for msg in consumer.consume(10_000, 0.1):
                if msg.error() is not None:
                    raise KafkaException(msg.error())
                before = time.perf_counter()
                started = before if started is None else started
                received.append(deserialize(msg.value(), context))
                if len(received) == 1:
                    first_s = time.perf_counter() - before  # fetches the writer's schema by id
                else:
                    rest_s += time.perf_counter() - before
        assert started is not None
        return received, first_s, rest_s, time.perf_counter() - started
    finally:
        consumer.close()
