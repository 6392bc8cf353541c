"""The schema types the registry knows, by their REST API names."""

from __future__ import annotations

from collections.abc import Callable

from .base import Incompatibility, ParsedSchema, References, SchemaError

__all__ = ["SCHEMA_TYPES", "Incompatibility", "ParsedSchema", "References", "SchemaError", "parse_schema"]

# The REST API's words; AVRO is what a request without ``schemaType`` means.
SCHEMA_TYPES = ("AVRO", "PROTOBUF", "JSON")


def _parser(schema_type: str) -> Callable[[str, References], ParsedSchema]:
    # Imported on use: each format pulls in its own parsing library.
    if schema_type == "AVRO":
        from .avro import parse_avro
        return parse_avro
    if schema_type == "PROTOBUF":
        from .protobuf import parse_protobuf
        return parse_protobuf
    if schema_type == "JSON":
        from .json_schema import parse_json_schema
        return parse_json_schema
    raise SchemaError(f"unknown schema type {schema_type!r}; one of {', '.join(SCHEMA_TYPES)}")


def parse_schema(schema_type: str, text: str, references: References | None = None) -> ParsedSchema:
    """Parse ``text`` as a schema of ``schema_type``; :class:`SchemaError` when it is not one."""
    return _parser(schema_type)(text, references or {})
