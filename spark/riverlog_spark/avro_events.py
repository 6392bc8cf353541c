"""Events as Avro in Confluent's wire format: what ``riverlog-spark generate --format avro`` writes.

A value is the magic byte 0, the writer schema's registry id (4 bytes, big-endian) and the
record in Avro's binary encoding, as confluent-kafka's AvroSerializer and Confluent's Java
serializers write it, so any registry-aware consumer reads it. The encoding is fastavro's.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from .schemas import AMOUNT_PRECISION, AMOUNT_SCALE

MAGIC_BYTE = 0
HEADER_SIZE = 5  # magic byte + schema id
_HEADER = struct.Struct(">bi")
_CENTS = Decimal(1).scaleb(-AMOUNT_SCALE)

# The generator's event schema (docs/spark.md's JSON event, field for field). ``amount`` is
# Avro's decimal logical type, which Spark's from_avro reads as DECIMAL(12,2) like the JSON path.
EVENT_SCHEMA: dict[str, Any] = {
    "type": "record", "name": "Event", "namespace": "dev.riverlog.spark",
    "fields": [
        {"name": "event_id", "type": "string"},
        {"name": "user", "type": "string"},
        {"name": "category", "type": "string"},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal",
                                    "precision": AMOUNT_PRECISION, "scale": AMOUNT_SCALE}},
        {"name": "ts", "type": "long"},
    ],
}


def event_schema_text() -> str:
    return json.dumps(EVENT_SCHEMA, separators=(",", ":"))


def frame(schema_id: int, payload: bytes) -> bytes:
    """The wire format: header, then the Avro binary record."""
    return _HEADER.pack(MAGIC_BYTE, schema_id) + payload


class AvroEncoder:
    """Encodes records of one registered schema (fastavro parses it once)."""

    def __init__(self, schema: Mapping[str, Any], schema_id: int) -> None:
        import fastavro

        self._parsed = fastavro.parse_schema(dict(schema))
        self.schema_id = schema_id

    def encode(self, record: Mapping[str, Any]) -> bytes:
        import fastavro

        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, self._parsed, dict(record))
        return frame(self.schema_id, buffer.getvalue())


def avro_event(event: Mapping[str, Any]) -> dict[str, Any]:
    """A generated event as the Avro record: the amount as an exact two-place Decimal (the
    generator's float holds whole cents / 100, so rounding to cents gives them back)."""
    return {**event, "amount": Decimal(repr(event["amount"])).quantize(_CENTS)}
