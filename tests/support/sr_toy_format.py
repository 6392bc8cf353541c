"""A stand-in schema format for the registry's own tests, used only where a real format module
(``schema_registry/formats/avro.py`` and friends, written separately) is not there yet.

``parse_for_tests(type, text, references)`` uses the real parser when the format's module
exists, so the same tests exercise real Avro once it lands. The stand-in reads the text as JSON
and knows one compatibility rule, which Avro also has: a reader field without a default that the
writer lacks breaks reading (plus a field whose type changed). Tests written against it hold for
real Avro schemas of the same shape.
"""

from __future__ import annotations

import json

from riverlog.schema_registry.formats import Incompatibility, ParsedSchema, References, SchemaError, parse_schema


class ToySchema(ParsedSchema):
    def __init__(self, schema_type: str, obj: object) -> None:
        self.schema_type = schema_type
        self.obj = obj

    def canonical(self) -> str:
        return json.dumps(self.obj, sort_keys=True, separators=(",", ":"))

    def normalized(self) -> str:
        return self.canonical()

    def _fields(self) -> dict[str, dict[str, object]]:
        if isinstance(self.obj, dict) and isinstance(self.obj.get("fields"), list):
            return {f["name"]: f for f in self.obj["fields"] if isinstance(f, dict) and "name" in f}
        return {}

    def read_errors(self, writer: ParsedSchema) -> list[Incompatibility]:
        if not isinstance(writer, ToySchema):
            return [Incompatibility("TYPE_MISMATCH", "/", "different kinds of schema")]
        if isinstance(self.obj, dict) != isinstance(writer.obj, dict) or (
                not isinstance(self.obj, dict) and self.obj != writer.obj):
            return [Incompatibility("TYPE_MISMATCH", "/", f"reader type {self.obj} is not writer type {writer.obj}")]
        theirs = writer._fields()
        out = []
        for index, (name, field) in enumerate(self._fields().items()):
            if name not in theirs and "default" not in field:
                out.append(Incompatibility("READER_FIELD_MISSING_DEFAULT_VALUE", f"/fields/{index}",
                                           f"{name} has no default value and is missing in the writer's schema"))
            elif name in theirs and theirs[name].get("type") != field.get("type"):
                out.append(Incompatibility("TYPE_MISMATCH", f"/fields/{index}/type",
                                           f"{name} is {theirs[name].get('type')} in the writer's schema"))
        return out


def parse_toy(schema_type: str, text: str, references: References) -> ParsedSchema:
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise SchemaError(f"not JSON: {exc}") from None
    if isinstance(obj, str):
        return ToySchema(schema_type, obj)
    if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
        raise SchemaError("a schema is a type name or an object with a \"type\"")
    if obj["type"] == "record" and not isinstance(obj.get("fields"), list):
        raise SchemaError("a record needs \"fields\"")
    return ToySchema(schema_type, obj)


def parse_for_tests(schema_type: str, text: str, references: References) -> ParsedSchema:
    try:
        return parse_schema(schema_type, text, references)
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("riverlog.schema_registry.formats."):
            raise
        return parse_toy(schema_type, text, references)
