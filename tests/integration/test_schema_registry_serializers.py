"""Issue #20, acceptance 1: confluent-kafka's ``SchemaRegistryClient`` with its Avro, Protobuf
and JSON Schema serializers and deserializers, unchanged, round-trip records through a Riverlog
topic with the schema registered in Riverlog's registry, and the schema evolves between two
versions in between: records of both versions are read back exactly, an incompatible third
version is refused (HTTP 409) when the serializer tries to register it.

Each format follows its own evolution rule: Avro adds a field with a default; Protobuf adds a
field (unknown to old readers, absent for new readers of old records); JSON Schema adds an
optional property to a closed content model (``additionalProperties: false``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext, SerializationError
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message
from support.sr_registry import RegistryProcess

pytestmark = pytest.mark.integration

COUNT = 20  # records per schema version


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0


def consume(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"sr-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    out: list[bytes] = []
    try:
        for _ in range(300):
            if len(out) >= count:
                break
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                out.append(msg.value())
    finally:
        consumer.close()
    assert len(out) == count, f"read {len(out)} of {count} records"
    return out


Serializer = Callable[[Any, SerializationContext], bytes]


def round_trip(schema_registry: RegistryProcess, topic: str,
               batches: list[tuple[Serializer, list[Any]]]) -> list[bytes]:
    """Serialize every batch with its serializer into ``topic``; read the raw records back."""
    context = SerializationContext(topic, MessageField.VALUE)
    values = [serialize(item, context) for serialize, items in batches for item in items]
    bootstrap = schema_registry.bootstrap
    produce(bootstrap, topic, values)
    return consume(bootstrap, topic, len(values))


def schema_id(raw: bytes) -> int:
    assert raw[0] == 0, "Confluent's wire format starts with magic byte 0"
    return int.from_bytes(raw[1:5], "big")


# --- Avro --------------------------------------------------------------------------------------

AVRO_V1 = {"type": "record", "name": "Order", "namespace": "shop",
           "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}]}
AVRO_V2 = {**AVRO_V1, "fields": [*AVRO_V1["fields"], {"name": "qty", "type": "int", "default": 1}]}  # type: ignore[list-item]
AVRO_V3_BREAKING = {**AVRO_V1, "fields": [{"name": "id", "type": "string"}]}


def test_avro_serializers_round_trip_and_evolve(schema_registry: RegistryProcess,
                                                registry_client: SchemaRegistryClient) -> None:
    topic = "orders-avro"
    v1 = AvroSerializer(registry_client, json.dumps(AVRO_V1))
    v2 = AvroSerializer(registry_client, json.dumps(AVRO_V2))
    old = [{"id": i, "item": f"book-{i}"} for i in range(COUNT)]
    new = [{"id": COUNT + i, "item": f"pen-{i}", "qty": i + 2} for i in range(COUNT)]
    raw = round_trip(schema_registry, topic, [(v1, old), (v2, new)])
    context = SerializationContext(topic, MessageField.VALUE)
    # With the writer's schema (each record's id), and with v2 as the reader: v1 records get the default.
    as_written = AvroDeserializer(registry_client)
    assert [as_written(r, context) for r in raw] == old + new
    as_v2 = AvroDeserializer(registry_client, json.dumps(AVRO_V2))
    assert [as_v2(r, context) for r in raw] == [{**o, "qty": 1} for o in old] + new
    assert len({schema_id(r) for r in raw}) == 2
    assert registry_client.get_versions(f"{topic}-value") == [1, 2]
    with pytest.raises((SerializationError, SchemaRegistryError), match="409|ncompatible"):
        AvroSerializer(registry_client, json.dumps(AVRO_V3_BREAKING))({"id": "x"}, context)


# --- Protobuf ----------------------------------------------------------------------------------

def order_class(file_name: str, with_note: bool) -> type[Message]:
    """shop.Order built at run time (no protoc here): id int64 = 1, item string = 2 and, in v2,
    note string = 3."""
    proto = descriptor_pb2.FileDescriptorProto(name=file_name, package="shop", syntax="proto3")
    message = proto.message_type.add(name="Order")
    fields = [("id", 1, descriptor_pb2.FieldDescriptorProto.TYPE_INT64),
              ("item", 2, descriptor_pb2.FieldDescriptorProto.TYPE_STRING)]
    if with_note:
        fields.append(("note", 3, descriptor_pb2.FieldDescriptorProto.TYPE_STRING))
    for name, number, kind in fields:
        message.field.add(name=name, number=number, type=kind, label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    cls: type[Message] = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))
    return cls


def test_protobuf_serializers_round_trip_and_evolve(schema_registry: RegistryProcess,
                                                    registry_client: SchemaRegistryClient) -> None:
    topic = "orders-protobuf"
    order_v1, order_v2 = order_class("order.proto", False), order_class("order.proto", True)
    conf = {"use.deprecated.format": False}
    v1 = ProtobufSerializer(order_v1, registry_client, conf)
    v2 = ProtobufSerializer(order_v2, registry_client, conf)
    old = [order_v1(id=i, item=f"book-{i}") for i in range(COUNT)]
    new = [order_v2(id=COUNT + i, item=f"pen-{i}", note=f"n{i}") for i in range(COUNT)]
    raw = round_trip(schema_registry, topic, [(v1, old), (v2, new)])
    context = SerializationContext(topic, MessageField.VALUE)
    reader = ProtobufDeserializer(order_v2, conf, registry_client)
    read = [reader(r, context) for r in raw]
    assert [(m.id, m.item, m.note) for m in read] == [(m.id, m.item, "") for m in old] + [
        (m.id, m.item, m.note) for m in new]
    assert len({schema_id(r) for r in raw}) == 2
    assert registry_client.get_versions(f"{topic}-value") == [1, 2]
    # The registry gives the schema back as text, and as the descriptor the deserializer asks for.
    latest = registry_client.get_latest_version(f"{topic}-value")
    assert latest.schema.schema_type == "PROTOBUF" and "string note = 3;" in latest.schema.schema_str
    # id changed from int64 to string: a kind change Confluent's rules refuse.
    proto = descriptor_pb2.FileDescriptorProto(name="order.proto", package="shop", syntax="proto3")
    proto.message_type.add(name="Order").field.add(name="id", number=1,
                                                   type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                                                   label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    breaking = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))
    with pytest.raises((SerializationError, SchemaRegistryError), match="409|ncompatible"):
        ProtobufSerializer(breaking, registry_client, conf)(breaking(id="x"), context)


# --- JSON Schema -------------------------------------------------------------------------------

JSON_V1 = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
           "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
           "required": ["id", "item"], "additionalProperties": False}
JSON_V2 = {**JSON_V1, "properties": {**JSON_V1["properties"], "note": {"type": "string"}}}  # type: ignore[dict-item]
JSON_V3_BREAKING = {**JSON_V1, "properties": {"id": {"type": "string"}, "item": {"type": "string"}}}


def test_json_schema_serializers_round_trip_and_evolve(schema_registry: RegistryProcess,
                                                       registry_client: SchemaRegistryClient) -> None:
    topic = "orders-json"
    v1 = JSONSerializer(json.dumps(JSON_V1), registry_client)
    v2 = JSONSerializer(json.dumps(JSON_V2), registry_client)
    old = [{"id": i, "item": f"book-{i}"} for i in range(COUNT)]
    new = [{"id": COUNT + i, "item": f"pen-{i}", "note": f"n{i}"} for i in range(COUNT)]
    raw = round_trip(schema_registry, topic, [(v1, old), (v2, new)])
    context = SerializationContext(topic, MessageField.VALUE)
    # The v2 reader validates every record, v1's included (a closed model that only gained an
    # optional property accepts them).
    reader = JSONDeserializer(json.dumps(JSON_V2), schema_registry_client=registry_client)
    assert [reader(r, context) for r in raw] == old + new
    assert len({schema_id(r) for r in raw}) == 2
    assert registry_client.get_versions(f"{topic}-value") == [1, 2]
    with pytest.raises((SerializationError, SchemaRegistryError), match="409|ncompatible"):
        JSONSerializer(json.dumps(JSON_V3_BREAKING), registry_client)({"id": "x", "item": "y"}, context)
