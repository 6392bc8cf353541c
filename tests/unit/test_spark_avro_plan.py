"""The Avro path of riverlog-spark without Spark: the generator's wire format, and which of a
subject's versions the ETL decodes (each with its own writer schema) or refuses."""

from __future__ import annotations

import io
import json
from decimal import Decimal
from typing import Any

import fastavro
import pytest
from riverlog_spark.avro_events import EVENT_SCHEMA, AvroEncoder, avro_event, event_schema_text
from riverlog_spark.pipelines.avro_values import ValueSchemaError, plan
from riverlog_spark.registry_client import SubjectVersion
from riverlog_spark.schemas import EVENT_FIELDS

pytestmark = pytest.mark.unit


def with_fields(fields: list[dict[str, Any]]) -> str:
    return json.dumps({**EVENT_SCHEMA, "fields": fields})


def version(number: int, schema_id: int, schema: str, schema_type: str = "AVRO") -> SubjectVersion:
    return SubjectVersion(version=number, schema_id=schema_id, schema_type=schema_type, schema=schema,
                          has_references=False)


def test_generated_values_are_confluents_wire_format() -> None:
    event = {"event_id": "e-000001", "user": "u-0003", "category": "books", "amount": 12.3, "ts": 1_767_225_600_123}
    value = AvroEncoder(EVENT_SCHEMA, 258).encode(avro_event(event))
    assert value[:5] == b"\x00\x00\x00\x01\x02"  # magic byte 0, schema id 258 big-endian
    decoded = fastavro.schemaless_reader(io.BytesIO(value[5:]), fastavro.parse_schema(json.loads(event_schema_text())))
    assert decoded == {**event, "amount": Decimal("12.30")}


def test_each_version_the_latest_reads_is_a_writer_the_others_are_named() -> None:
    v1 = event_schema_text()
    fields = list(EVENT_SCHEMA["fields"])
    v2 = with_fields([*fields[:2], {"name": "channel", "type": "string", "default": "web"}, *fields[2:]])
    # v3 adds a field without a default: it cannot read v1's or v2's records.
    v3 = with_fields([*fields, {"name": "region", "type": "string"}])
    versions = [version(1, 11, v1), version(2, 12, v2), version(3, 13, 'syntax = "proto3";', "PROTOBUF")]

    planned = plan("events-value", versions, 2, EVENT_FIELDS)
    assert planned.reader == v2 and planned.reader_version == 2
    assert planned.writers == {11: v1, 12: v2}
    assert list(planned.unreadable) == [13] and "is PROTOBUF" in planned.unreadable[13]

    planned = plan("events-value", [version(1, 11, v1), version(2, 12, v2), version(3, 14, v3)], 3, EVENT_FIELDS)
    assert planned.writers == {14: v3}
    assert sorted(planned.unreadable) == [11, 12]
    assert "cannot be read with the latest version 3" in planned.unreadable[11]
    assert "region" in planned.unreadable[11]


def test_a_latest_version_the_pipeline_cannot_use_is_refused() -> None:
    no_amount = with_fields([f for f in EVENT_SCHEMA["fields"] if f["name"] != "amount"])
    with pytest.raises(ValueSchemaError, match="no field.*amount"):
        plan("events-value", [version(1, 11, no_amount)], 1, EVENT_FIELDS)
    with pytest.raises(ValueSchemaError, match="self-contained AVRO.*PROTOBUF"):
        plan("events-value", [version(1, 11, 'syntax = "proto3";', "PROTOBUF")], 1, EVENT_FIELDS)
