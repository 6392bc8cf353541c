"""Avro values in the schema registry's wire format, decoded with Spark's ``from_avro``.

``from_avro`` decodes with one writer schema, but a topic holds records of every version its
subject has had, each framed with its writer schema's id (magic byte 0, 4-byte big-endian id,
Avro binary). Decoding a record with another version's schema would not fail reliably: Avro's
binary carries no field names, so the bytes may decode into wrong values. So each id is decoded
with its own writer schema and the subject's latest version as the reader schema (from_avro's
``avroSchema`` option: Avro's schema resolution, e.g. a field added with a default filled in for
old records), and every record comes out in the latest version's shape.

The schemas are fetched once, when the pipeline starts. A record whose id was not a version of
the subject then (a version registered later, or a schema of another subject) stops the query
with an error naming the id: a restart fetches the versions again. So does a record of a version
the latest cannot read (another schema type, or an evolution the subject's compatibility level
let through), named with the reasons. Values not in the wire format at all are dropped, as the
JSON path drops values that are not JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .. import registry_client
from ..avro_events import HEADER_SIZE, MAGIC_BYTE

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


class ValueSchemaError(RuntimeError):
    """The subject's schemas cannot serve as the pipeline's reader schema; the message says why."""


@dataclass(frozen=True)
class ValueSchemas:
    """What decoding a subject's values needs: the reader schema and each id's writer schema."""

    subject: str
    reader_version: int
    reader: str
    writers: dict[int, str] = field(default_factory=dict)  # readable schema id -> writer schema
    unreadable: dict[int, str] = field(default_factory=dict)  # schema id -> why it cannot be read


def plan(subject: str, versions: list[registry_client.SubjectVersion], latest: int,
         required_fields: tuple[str, ...]) -> ValueSchemas:
    """Sort the subject's versions into readable writers and unreadable ones (pure, no Spark).

    Readability is Avro's schema resolution as the registry's compatibility check judges it
    (riverlog's own ``formats/avro.py``, which matches Apache Avro's ``SchemaCompatibility``).
    """
    from riverlog.schema_registry.formats import SchemaError, parse_schema

    by_version = {v.version: v for v in versions}
    head = by_version.get(latest)
    if head is None or head.schema_type != "AVRO" or head.has_references:
        kind = head.schema_type if head else "missing"
        raise ValueSchemaError(f"subject {subject!r}: the latest version {latest} must be a self-contained AVRO "
                               f"schema (it is {kind}{', with references' if head and head.has_references else ''})")
    reader = parse_schema("AVRO", head.schema)
    missing = [name for name in required_fields if name not in _record_fields(head.schema)]
    if missing:
        raise ValueSchemaError(f"subject {subject!r}: the latest version {latest} has no field(s) {', '.join(missing)}")
    writers: dict[int, str] = {}
    unreadable: dict[int, str] = {}
    for v in versions:
        where = f"version {v.version} (schema id {v.schema_id}) of {subject!r}"
        if v.schema_type != "AVRO" or v.has_references:
            unreadable[v.schema_id] = f"{where} is {v.schema_type}{' with references' if v.has_references else ''}"
            continue
        try:
            errors = reader.read_errors(parse_schema("AVRO", v.schema))
        except SchemaError as exc:
            unreadable[v.schema_id] = f"{where} does not parse: {exc}"
            continue
        if errors:
            reasons = "; ".join(e.message for e in errors)
            unreadable[v.schema_id] = f"{where} cannot be read with the latest version {latest}: {reasons}"
        else:
            writers[v.schema_id] = v.schema
    return ValueSchemas(subject=subject, reader_version=latest, reader=head.schema, writers=writers,
                        unreadable=unreadable)


def _record_fields(schema: str) -> set[str]:
    import json

    node = json.loads(schema)
    return {f["name"] for f in node.get("fields", [])} if isinstance(node, dict) else set()


def fetch(base_url: str, subject: str, required_fields: tuple[str, ...]) -> ValueSchemas:
    """The subject's schemas from the registry, planned; RegistryClientError or ValueSchemaError."""
    versions = registry_client.subject_versions(base_url, subject)
    return plan(subject, versions, registry_client.latest_version(base_url, subject), required_fields)


def decoded(schemas: ValueSchemas) -> Column:
    """The Kafka source's ``value`` as a struct of the reader schema's shape; null for values not
    in the wire format; an error stopping the query for ids it cannot decode (see the module)."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    value = F.col("value")
    framed = (F.length(value) >= HEADER_SIZE) & (F.hex(F.substring(value, 1, 1)) == f"{MAGIC_BYTE:02X}")
    schema_id = F.conv(F.hex(F.substring(value, 2, 4)), 16, 10).cast("long")
    payload = F.expr(f"substring(value, {HEADER_SIZE + 1})")
    # FAILFAST: a payload its own writer schema cannot decode is corrupt, not something to skip.
    options = {"avroSchema": schemas.reader, "mode": "FAILFAST"}
    where = F.concat(F.lit("record "), F.col("topic"), F.lit("-"), F.col("partition").cast("string"),
                     F.lit("@"), F.col("offset").cast("string"), F.lit(": "))
    branches: Column | None = None
    cases = [(i, from_avro(payload, writer, options)) for i, writer in sorted(schemas.writers.items())]
    cases += [(i, F.raise_error(F.concat(where, F.lit(reason)))) for i, reason in sorted(schemas.unreadable.items())]
    for schema_id_value, outcome in cases:
        condition = schema_id == schema_id_value
        branches = F.when(condition, outcome) if branches is None else branches.when(condition, outcome)
    unknown = F.raise_error(F.concat(
        where, F.lit("schema id "), schema_id.cast("string"),
        F.lit(f" is not a version of subject {schemas.subject!r} as fetched when the pipeline started; "
              "restart the pipeline to fetch the subject's versions again")))
    assert branches is not None  # the latest version is always among the readable writers
    return F.when(framed, branches.otherwise(unknown))


def decode(raw: DataFrame, schemas: ValueSchemas) -> DataFrame:
    """Kafka records -> the reader schema's columns, for values in the wire format."""
    from pyspark.sql import functions as F

    return raw.select(decoded(schemas).alias("v")).where(F.col("v").isNotNull()).select("v.*")
