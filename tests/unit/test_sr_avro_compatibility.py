"""The schema registry's Avro format (issue #20): compatibility table, parsing, canonical and
normalized texts, references, and the whole table checked against Apache Avro's Java library.

The table's rows are subject histories (oldest first; the last version is the one being
registered) with the verdict expected in every compatibility mode, in the order of ``MODES``:
NONE, BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, FULL, FULL_TRANSITIVE, as a
string of Y (compatible) and N (refused). ``test_table_agrees_with_avro_java`` runs every
reader/writer pair of the table (and every schema's parse and canonical text) through
``org.apache.avro`` in one JVM (tests/support/avro_java.py) and asserts the same verdicts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from riverlog.schema_registry.compatibility import MODES, compatibility_errors
from riverlog.schema_registry.formats import SchemaError, parse_schema
from riverlog.schema_registry.formats.avro import AvroSchema, parse_avro
from support import avro_java

pytestmark = pytest.mark.unit


# --- schema builders (JSON texts) -----------------------------------------------------------------

def f(name: str, type_: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, **extra}


def rec(name: str, *fields: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, **extra, "fields": list(fields)}


def enum(name: str, *symbols: str, **extra: Any) -> dict[str, Any]:
    return {"type": "enum", "name": name, "symbols": list(symbols), **extra}


def fixed(name: str, size: int, **extra: Any) -> dict[str, Any]:
    return {"type": "fixed", "name": name, "size": size, **extra}


def arr(items: Any) -> dict[str, Any]:
    return {"type": "array", "items": items}


def amap(values: Any) -> dict[str, Any]:
    return {"type": "map", "values": values}


def text(schema: Any) -> str:
    return json.dumps(schema)


@dataclass(frozen=True)
class Version:
    schema: str
    references: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Case:
    name: str
    versions: tuple[Version, ...]
    expected: str  # Y/N per mode, in MODES order

    def verdicts(self) -> dict[str, bool]:
        assert len(self.expected) == len(MODES), self.name
        return {mode: flag == "Y" for mode, flag in zip(MODES, self.expected, strict=True)}


def case(name: str, *versions: Any, expected: str, refs: Mapping[str, str] | None = None) -> Case:
    """``versions``: schemas (dicts/lists/strings as JSON) or ready :class:`Version` objects."""
    built = tuple(v if isinstance(v, Version) else Version(text(v), refs or {}) for v in versions)
    return Case(name, built, expected.replace(" ", ""))


ALL = "Y YY YY YY"
BACKWARD_ONLY = "Y YY NN NN"
FORWARD_ONLY = "Y NN YY NN"
NEITHER = "Y NN NN NN"

R = "com.example.R"
A_INT = f("a", "int")

# Named types of the reference cases: the reference's name is the type's full name.
CURRENCY_V1 = text(enum("Currency", "EUR", "USD", namespace="com.example.money"))
CURRENCY_V2 = text(enum("Currency", "EUR", "USD", "GBP", namespace="com.example.money"))
MONEY = text(rec("Money", f("units", "long"), f("currency", "com.example.money.Currency"),
                 namespace="com.example.money"))

CASES: list[Case] = [
    # Fields added and removed.
    case("add field with default", rec(R, A_INT), rec(R, A_INT, f("b", "string", default="x")), expected=ALL),
    case("add field without default", rec(R, A_INT), rec(R, A_INT, f("b", "string")), expected=FORWARD_ONLY),
    case("remove field with default", rec(R, A_INT, f("b", "string", default="x")), rec(R, A_INT), expected=ALL),
    case("remove field without default", rec(R, A_INT, f("b", "string")), rec(R, A_INT), expected=BACKWARD_ONLY),
    case("add optional field, null default", rec(R, A_INT), rec(R, A_INT, f("b", ["null", "string"], default=None)),
         expected=ALL),
    case("add field to empty record without default", rec(R), rec(R, A_INT), expected=FORWARD_ONLY),
    case("field default changed", rec(R, f("a", "int", default=1)), rec(R, f("a", "int", default=2)), expected=ALL),
    case("field order swapped", rec(R, A_INT, f("b", "string")), rec(R, f("b", "string"), A_INT), expected=ALL),
    case("doc changed only", rec(R, A_INT, doc="one"), rec(R, f("a", "int", doc="x"), doc="two"), expected=ALL),
    # Renamed fields.
    case("field renamed", rec(R, A_INT), rec(R, f("b", "int")), expected=NEITHER),
    case("field renamed with alias", rec(R, A_INT), rec(R, f("b", "int", aliases=["a"])), expected=BACKWARD_ONLY),
    case("field renamed with alias, old had default", rec(R, f("a", "int", default=0)),
         rec(R, f("b", "int", aliases=["a"])), expected=ALL),
    # Only the reader's aliases count: the new reader's "b" does not find the old "a" (whose
    # alias is "b"), while the old reader's "a" finds the new "b" through its alias.
    case("writer-side field alias does not count", rec(R, f("a", "int", aliases=["b"])), rec(R, f("b", "int")),
         expected=FORWARD_ONLY),
    # Promotions and their reverse.
    case("int to long", rec(R, A_INT), rec(R, f("a", "long")), expected=BACKWARD_ONLY),
    case("long to int", rec(R, f("a", "long")), rec(R, A_INT), expected=FORWARD_ONLY),
    case("int to float", rec(R, A_INT), rec(R, f("a", "float")), expected=BACKWARD_ONLY),
    case("int to double", rec(R, A_INT), rec(R, f("a", "double")), expected=BACKWARD_ONLY),
    case("long to float", rec(R, f("a", "long")), rec(R, f("a", "float")), expected=BACKWARD_ONLY),
    case("long to double", rec(R, f("a", "long")), rec(R, f("a", "double")), expected=BACKWARD_ONLY),
    case("float to double", rec(R, f("a", "float")), rec(R, f("a", "double")), expected=BACKWARD_ONLY),
    case("double to float", rec(R, f("a", "double")), rec(R, f("a", "float")), expected=FORWARD_ONLY),
    case("string to bytes", rec(R, f("a", "string")), rec(R, f("a", "bytes")), expected=ALL),
    case("int to string", rec(R, A_INT), rec(R, f("a", "string")), expected=NEITHER),
    case("boolean to int", rec(R, f("a", "boolean")), rec(R, A_INT), expected=NEITHER),
    case("top-level string to bytes", "string", "bytes", expected=ALL),
    case("top-level int to long", "int", "long", expected=BACKWARD_ONLY),
    case("top-level string to record", "string", rec(R, A_INT), expected=NEITHER),
    case("null to null", "null", {"type": "null"}, expected=ALL),
    # Enums.
    case("enum symbol added", enum("E", "A", "B"), enum("E", "A", "B", "C"), expected=BACKWARD_ONLY),
    case("enum symbol removed", enum("E", "A", "B", "C"), enum("E", "A", "B"), expected=FORWARD_ONLY),
    case("enum symbol added, both with default", enum("E", "A", "B", default="A"),
         enum("E", "A", "B", "C", default="A"), expected=ALL),
    case("enum symbol removed, new has default", enum("E", "A", "B", "C"), enum("E", "A", "B", default="A"),
         expected=ALL),
    case("enum renamed", enum("E", "A"), enum("F", "A"), expected=NEITHER),
    case("enum renamed with alias", enum("E", "A"), enum("F", "A", aliases=["E"]), expected=BACKWARD_ONLY),
    case("enum field symbol added", rec(R, f("e", enum("E", "A"))), rec(R, f("e", enum("E", "A", "B"))),
         expected=BACKWARD_ONLY),
    case("enum field with enum default but no field default added", rec(R, A_INT),
         rec(R, A_INT, f("e", enum("E", "A", "B", default="A"))), expected=FORWARD_ONLY),
    # Unions.
    case("int to [null,int]", rec(R, A_INT), rec(R, f("a", ["null", "int"], default=None)),
         expected=BACKWARD_ONLY),
    case("[null,int] to int", rec(R, f("a", ["null", "int"], default=None)), rec(R, A_INT), expected=FORWARD_ONLY),
    case("union branch added", ["null", "int"], ["null", "int", "string"], expected=BACKWARD_ONLY),
    case("union branch removed", ["null", "int", "string"], ["null", "int"], expected=FORWARD_ONLY),
    case("union branches reordered", ["null", "string"], ["string", "null"], expected=ALL),
    case("int to [null,long]", "int", ["null", "long"], expected=BACKWARD_ONLY),
    case("[int,string] to [long,string]", ["int", "string"], ["long", "string"], expected=BACKWARD_ONLY),
    case("[int,long] to long", ["int", "long"], "long", expected=ALL),
    case("union of records, member gains field without default", ["null", rec(R, A_INT)],
         ["null", rec(R, A_INT, f("b", "int"))], expected=FORWARD_ONLY),
    case("union record branch renamed", ["null", rec(R, A_INT)], ["null", rec("com.example.S", A_INT)],
         expected=NEITHER),
    # Records: names, namespaces, nesting.
    case("record renamed", rec(R, A_INT), rec("com.example.S", A_INT), expected=NEITHER),
    case("record renamed with alias", rec(R, A_INT), rec("com.example.S", A_INT, aliases=[R]),
         expected=BACKWARD_ONLY),
    case("record renamed with short alias in its namespace", rec(R, A_INT),
         rec("S", A_INT, namespace="com.example", aliases=["R"]), expected=BACKWARD_ONLY),
    case("namespace changed only", rec(R, A_INT), rec("org.other.R", A_INT), expected=ALL),
    case("namespace dropped", rec(R, A_INT), rec("R", A_INT), expected=ALL),
    case("nested record gains field without default", rec(R, f("n", rec("N", A_INT))),
         rec(R, f("n", rec("N", A_INT, f("b", "int")))), expected=FORWARD_ONLY),
    case("nested record gains field with default", rec(R, f("n", rec("N", A_INT))),
         rec(R, f("n", rec("N", A_INT, f("b", "int", default=0)))), expected=ALL),
    case("nested record field promoted", rec(R, f("n", rec("N", A_INT))), rec(R, f("n", rec("N", f("a", "long"))))
         , expected=BACKWARD_ONLY),
    # Fixed.
    case("fixed size changed", fixed("F", 16), fixed("F", 32), expected=NEITHER),
    case("fixed renamed", fixed("F", 16), fixed("G", 16), expected=NEITHER),
    case("fixed renamed with alias", fixed("F", 16), fixed("G", 16, aliases=["F"]), expected=BACKWARD_ONLY),
    case("fixed to bytes", rec(R, f("a", fixed("F", 4))), rec(R, f("a", "bytes")), expected=NEITHER),
    # Arrays and maps.
    case("array items int to long", arr("int"), arr("long"), expected=BACKWARD_ONLY),
    case("map values string to int", amap("string"), amap("int"), expected=NEITHER),
    case("array to map", arr("int"), amap("int"), expected=NEITHER),
    case("array of records gains field without default", arr(rec(R, A_INT)), arr(rec(R, A_INT, f("b", "int"))),
         expected=FORWARD_ONLY),
    case("map values union gains branch", amap(["null", "int"]), amap(["null", "int", "string"]),
         expected=BACKWARD_ONLY),
    case("array items record renamed with alias", arr(rec(R, A_INT)), arr(rec("com.example.S", A_INT, aliases=[R])),
         expected=BACKWARD_ONLY),
    # Recursive types.
    case("linked list gains field with default", rec("Node", f("v", "int"), f("next", ["null", "Node"], default=None)),
         rec("Node", f("v", "int"), f("next", ["null", "Node"], default=None), f("w", "int", default=0)), expected=ALL),
    case("linked list gains field without default",
         rec("Node", f("v", "int"), f("next", ["null", "Node"], default=None)),
         rec("Node", f("v", "int"), f("next", ["null", "Node"], default=None), f("w", "int")), expected=FORWARD_ONLY),
    case("tree value promoted", rec("Tree", f("v", "int"), f("kids", arr("Tree"))),
         rec("Tree", f("v", "long"), f("kids", arr("Tree"))), expected=BACKWARD_ONLY),
    case("mutually recursive records", rec("A", f("b", ["null", rec("B", f("a", ["null", "A"]))])),
         rec("A", f("b", ["null", rec("B", f("a", ["null", "A"]), f("x", "int", default=1))])), expected=ALL),
    # Logical types: Avro's compatibility looks at the underlying types only.
    case("int gains date logical type", rec(R, A_INT), rec(R, f("a", {"type": "int", "logicalType": "date"})),
         expected=ALL),
    case("timestamp-millis to timestamp-micros", {"type": "long", "logicalType": "timestamp-millis"},
         {"type": "long", "logicalType": "timestamp-micros"}, expected=ALL),
    case("decimal precision changed", {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2},
         {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}, expected=ALL),
    case("uuid string to plain string", {"type": "string", "logicalType": "uuid"}, "string", expected=ALL),
    case("date int to timestamp-millis long", {"type": "int", "logicalType": "date"},
         {"type": "long", "logicalType": "timestamp-millis"}, expected=BACKWARD_ONLY),
    # References: named types defined by other subjects' schemas.
    case("referenced enum gains symbol",
         Version(text(rec(R, f("c", "com.example.money.Currency"))), {"com.example.money.Currency": CURRENCY_V1}),
         Version(text(rec(R, f("c", "com.example.money.Currency"))), {"com.example.money.Currency": CURRENCY_V2}),
         expected=BACKWARD_ONLY),
    case("field of a referenced record type added with default",
         Version(text(rec(R, A_INT)), {}),
         Version(text(rec(R, A_INT, f("price", ["null", "com.example.money.Money"], default=None))),
                 {"com.example.money.Currency": CURRENCY_V1, "com.example.money.Money": MONEY}),
         expected=ALL),
    case("schema inlines what a reference defined", Version(text(rec(R, f("c", enum(
        "Currency", "EUR", "USD", namespace="com.example.money"))))),
         Version(text(rec(R, f("c", "com.example.money.Currency"))), {"com.example.money.Currency": CURRENCY_V1}),
         expected=ALL),
    # Three versions, where checking only the latest and checking all differ.
    case("field added with default, then default dropped", rec(R, A_INT),
         rec(R, A_INT, f("b", "int", default=0)), rec(R, A_INT, f("b", "int")), expected="Y YN YY YN"),
    case("field given a default, then removed", rec(R, A_INT, f("b", "int")),
         rec(R, A_INT, f("b", "int", default=0)), rec(R, A_INT), expected="Y YY YN YN"),
    case("enum with default loses a symbol, older had none", enum("E", "A", "B"),
         enum("E", "A", "B", "C", default="A"), enum("E", "A", "C", default="A"), expected="Y YY YN YN"),
    case("field removed then re-added with another type", rec(R, A_INT, f("b", "int", default=0)), rec(R, A_INT),
         rec(R, A_INT, f("b", "string", default="")), expected="Y YN YN YN"),
    case("widening twice", "int", "long", "double", expected="Y YY NN NN"),
    # The second reader's "string" reads the newest "bytes" (bytes and string promote both ways).
    case("union grows twice", ["null", "int"], ["null", "int", "string"], ["null", "int", "string", "bytes"],
         expected="Y YY YN YN"),
]


def _schemas(case_: Case) -> list[AvroSchema]:
    return [parse_avro(v.schema, v.references) for v in case_.versions]


def test_table_size() -> None:
    assert len(CASES) >= 50
    assert len({c.name for c in CASES}) == len(CASES), "case names are unique"
    assert sum(len(c.versions) > 2 for c in CASES) >= 3


@pytest.mark.parametrize("case_", CASES, ids=lambda c: c.name)
def test_table_rows_are_consistent(case_: Case) -> None:
    # FULL is BACKWARD and FORWARD; NONE allows everything; transitive is never more lenient.
    v = case_.verdicts()
    assert v["NONE"]
    for kind in ("", "_TRANSITIVE"):
        assert v["FULL" + kind] == (v["BACKWARD" + kind] and v["FORWARD" + kind])
    for mode in ("BACKWARD", "FORWARD", "FULL"):
        assert v[mode] or not v[mode + "_TRANSITIVE"]


@pytest.mark.parametrize("case_", CASES, ids=lambda c: c.name)
def test_compatibility_table(case_: Case) -> None:
    *old, new = _schemas(case_)
    earlier = list(enumerate(old, start=1))
    got = {mode: not compatibility_errors(mode, new, earlier) for mode in MODES}
    assert got == case_.verdicts()


# --- incompatibility kinds and paths ----------------------------------------------------------------

def _errors(reader: Any, writer: Any) -> list[tuple[str, str]]:
    r, w = (parse_avro(text(s), {}) for s in (reader, writer))
    return [(e.kind, e.path) for e in r.read_errors(w)]


def test_kinds_and_paths() -> None:
    assert _errors(rec(R, A_INT, f("b", "int")), rec(R, A_INT)) == [("READER_FIELD_MISSING_DEFAULT_VALUE", "/fields/1")]
    assert _errors(rec(R, A_INT, f("b", "int")), rec(R, A_INT, f("b", "string"))) == [
        ("TYPE_MISMATCH", "/fields/1/type")]
    assert _errors(enum("E", "A"), enum("E", "A", "C", "B")) == [("MISSING_ENUM_SYMBOLS", "/symbols")]
    assert _errors(fixed("F", 4), fixed("G", 8)) == [("NAME_MISMATCH", "/name"), ("FIXED_SIZE_MISMATCH", "/size")]
    assert _errors(["null", "int"], ["null", "int", "string"]) == [("MISSING_UNION_BRANCH", "/2")]
    assert _errors("int", ["null", "int"]) == [("TYPE_MISMATCH", "/0")]
    assert _errors(rec(R, f("a", arr(amap("int")))), rec(R, f("a", arr(amap("string"))))) == [
        ("TYPE_MISMATCH", "/fields/0/type/items/values")]
    assert _errors("int", "string") == [("TYPE_MISMATCH", "/")]


def test_messages_name_what_is_missing() -> None:
    r = parse_avro(text(enum("E", "A")), {})
    (error,) = r.read_errors(parse_avro(text(enum("E", "A", "C", "B")), {}))
    assert error.message == "[B, C]"
    (error,) = parse_avro('"long"', {}).read_errors(parse_avro('"string"', {}))
    assert error.message == "reader type: LONG not compatible with writer type: STRING"
    messages = compatibility_errors("BACKWARD", parse_avro(text(rec(R, A_INT, f("b", "int"))), {}),
                                    [(3, parse_avro(text(rec(R, A_INT)), {}))])
    assert "errorType:'READER_FIELD_MISSING_DEFAULT_VALUE'" in messages[0]
    assert "{oldSchemaVersion: 3}" in messages


def test_recursive_schemas_terminate() -> None:
    tree = text(rec("T", f("kids", arr("T")), f("m", amap(["null", "T"]))))
    a, b = parse_avro(tree, {}), parse_avro(tree, {})
    assert a.read_errors(b) == []
    assert a.canonical() == b.canonical()


# --- parsing ------------------------------------------------------------------------------------------

INVALID: list[tuple[str, str]] = [
    ("not JSON", "{nope"),
    ("NaN literal", '{"type":"record","name":"R","fields":[{"name":"a","type":"double","default":NaN}]}'),
    ("unknown type", '{"type":"strin"}'),
    ("undefined name", text(rec(R, f("a", "Nope")))),
    ("number", "5"),
    ("no name", '{"type":"record","fields":[]}'),
    ("bad name", text(rec("1R"))),
    ("bad name character", text(rec("R-2"))),
    ("bad namespace", text(rec("R", namespace="a..b"))),
    ("named after primitive", text(rec("string"))),
    ("no fields", '{"type":"record","name":"R"}'),
    ("duplicate field", text(rec(R, A_INT, A_INT))),
    ("bad field name", text(rec(R, f("a-b", "int")))),
    ("field without type", '{"type":"record","name":"R","fields":[{"name":"a"}]}'),
    ("bad order", text(rec(R, f("a", "int", order="sideways")))),
    ("duplicate symbol", text(enum("E", "A", "A"))),
    ("bad symbol", text(enum("E", "1A"))),
    ("enum default not a symbol", text(enum("E", "A", default="B"))),
    ("enum without symbols", '{"type":"enum","name":"E"}'),
    ("negative fixed size", text(fixed("F", -1))),
    ("fixed size not int", '{"type":"fixed","name":"F","size":"4"}'),
    ("array without items", '{"type":"array"}'),
    ("map without values", '{"type":"map"}'),
    ("nested union", '["int",["long"]]'),
    ("duplicate union branch", '["int","int"]'),
    ("duplicate array branch", text(["null", arr("int"), arr("long")])),
    ("redefined record", text(rec(R, f("a", rec("Q")), f("b", rec("Q", A_INT))))),
    ("int default is string", text(rec(R, f("a", "int", default="1")))),
    ("int default too big", text(rec(R, f("a", "int", default=2**31)))),
    ("int default fractional", text(rec(R, f("a", "int", default=1.5)))),
    ("long default is float", text(rec(R, f("a", "long", default=1.0)))),
    ("boolean default null", text(rec(R, f("a", "boolean", default=None)))),
    ("string default number", text(rec(R, f("a", "string", default=5)))),
    ("double default not a number", text(rec(R, f("a", "double", default="abc")))),
    ("union default matches no branch", text(rec(R, f("a", ["null", "int"], default="x")))),
    ("record default misses a field", text(rec(R, f("a", rec("S", f("x", "int")), default={})))),
    ("array default wrong item", text(rec(R, f("a", arr("int"), default=[1, "x"])))),
    ("map default wrong value", text(rec(R, f("a", amap("int"), default={"k": "v"})))),
    ("alias not a string", text(rec(R, f("a", "int", aliases=[1])))),
    ("aliases not an array", text(rec(R, aliases="Q"))),
    ("bad record alias", text(rec(R, aliases=["1Q"]))),
]

VALID: list[str] = [
    '"string"', '{"type":"string"}', '["null","string"]', "[]",
    text(rec(R, f("a", ["string", "null"], default=None))),  # Avro 1.12: a default may match any branch
    text(rec(R, f("a", "double", default="NaN"), f("b", "float", default=1))),
    text(rec(R, f("a", "int", aliases=["1x"]))),  # field aliases are not checked as names
    text(rec(R, f("e", enum("E", "A")), f("g", enum("E", "A")))),  # an identical redefinition
    text(rec(R, f("q", rec("Q", A_INT, doc="x")), f("g", rec("Q", A_INT)))),  # equal but for the doc
    text(rec(R, f("a", "E"), f("e", enum("E", "A")))),  # used before it is defined
    text(rec(R, f("u", "int", default=1, doc="d", order="descending", foo="bar"), doc="x", aliases=["Q"], zz=1)),
    text(rec("a.b.R", f("e", enum("E", "A", "B", default="A", doc="x", aliases=["F"], p=1)),
             f("f", fixed("F", 4, namespace="other", aliases=["G"])), f("g", "other.F"), f("h", "E"),
             f("i", rec("N", f("z", rec("M")), namespace="")))),
    text({"type": "bytes", "logicalType": "decimal", "precision": -1}),  # invalid logical types stay properties
    text(rec(R, f("f", "double", default=1.5e10), f("g", "double", default=1e-5), f("h", "float", default=0.001),
             f("s", "string", default="é\"/<\u2028\u0001"))),
    text(rec("string", namespace="n")),
    text({"type": "error", "name": "Oops", "fields": []}),
]


@pytest.mark.parametrize(("label", "schema"), INVALID, ids=[label for label, _ in INVALID])
def test_invalid_schemas_are_refused(label: str, schema: str) -> None:
    with pytest.raises(SchemaError) as raised:
        parse_schema("AVRO", schema)
    assert str(raised.value)


@pytest.mark.parametrize("schema", VALID)
def test_valid_schemas_parse(schema: str) -> None:
    parsed = parse_schema("AVRO", schema)
    assert parsed.schema_type == "AVRO"
    assert parse_avro(parsed.canonical(), {}).canonical() == parsed.canonical()


def test_bare_primitive_is_a_schema() -> None:
    assert parse_schema("AVRO", '"string"').canonical() == '"string"'
    assert parse_schema("AVRO", '{"type": "string"}').canonical() == '"string"'


def test_canonical_ignores_whitespace_and_key_order() -> None:
    a = '{"type": "record", "name": "R", "namespace": "n", "doc": "d", "fields": [{"name": "a", "type": "int", ' \
        '"default": 1}, {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["X", "Y"]}}]}'
    b = '{"fields":[{"default":1,"type":"int","name":"a"},{"type":{"symbols":["X","Y"],"name":"E",' \
        '"type":"enum"},"name":"e"}],\n  "doc":"d","namespace":"n","name":"R","type":"record"}'
    expected = ('{"type":"record","name":"R","namespace":"n","doc":"d","fields":[{"name":"a","type":"int",'
                '"default":1},{"name":"e","type":{"type":"enum","name":"E","symbols":["X","Y"]}}]}')
    assert parse_avro(a, {}).canonical() == parse_avro(b, {}).canonical() == expected
    assert parse_avro(a, {}) == parse_avro(b, {})


def test_canonical_keeps_attributes() -> None:
    schema = ('{"type":"record","name":"R","namespace":"n","doc":"d","fields":[{"name":"a","type":{"type":"long",'
              '"logicalType":"timestamp-millis"},"doc":"fd","default":0,"order":"descending","aliases":["b"],"x":1}],'
              '"custom":{"k":[1,2]},"aliases":["Old"]}')
    assert parse_avro(schema, {}).canonical() == schema


def test_canonical_names_relative_to_the_namespace() -> None:
    schema = text(rec("a.R", f("x", rec("S", f("y", "int"))), f("z", "a.S"), f("o", rec("b.T")), f("p", "b.T")))
    assert parse_avro(schema, {}).canonical() == (
        '{"type":"record","name":"R","namespace":"a","fields":[{"name":"x","type":{"type":"record","name":"S",'
        '"fields":[{"name":"y","type":"int"}]}},{"name":"z","type":"S"},{"name":"o","type":{"type":"record",'
        '"name":"T","namespace":"b","fields":[]}},{"name":"p","type":"b.T"}]}')


def test_normalized_equal_for_equivalent_schemas() -> None:
    a = text(rec("R", f("a", "double", default=1), f("e", enum("E", "A")), namespace="n", aliases=["X", "n.Y"],
                 p={"b": 1, "a": 2}))
    b = text(rec("n.R", f("a", "double", default=1.0), f("e", enum("n.E", "A")),
                 aliases=["n.Y", "n.X"], p={"a": 2, "b": 1}))
    pa, pb = parse_avro(a, {}), parse_avro(b, {})
    assert pa.canonical() != pb.canonical()
    assert pa.normalized() == pb.normalized()
    # Meaningful differences survive normalization.
    for other in (rec("n.R", f("a", "double", default=2.0), f("e", enum("n.E", "A"))),
                  rec("n.R", f("a", "double", default=1.0), f("e", enum("n.E", "A", default="A"))),
                  rec("n.R", f("a", "double", default=1.0, aliases=["z"]), f("e", enum("n.E", "A"))),
                  rec("m.R", f("a", "double", default=1.0), f("e", enum("n.E", "A")))):
        assert parse_avro(text(other), {}).normalized() != parse_avro(text(rec(
            "n.R", f("a", "double", default=1.0), f("e", enum("n.E", "A")))), {}).normalized()


def test_normalized_keeps_logical_types_and_defaults() -> None:
    normalized = parse_avro(text(rec("R", f("t", {"type": "long", "logicalType": "timestamp-millis"}, default=0))),
                            {}).normalized()
    assert normalized == ('{"name":"R","type":"record","fields":[{"name":"t","type":{"type":"long",'
                          '"logicalType":"timestamp-millis"},"default":0}]}')


# --- references ----------------------------------------------------------------------------------------

def test_references_provide_named_types() -> None:
    refs = {"com.example.money.Currency": CURRENCY_V1, "com.example.money.Money": MONEY}
    schema = parse_avro(text(rec("com.example.Order", f("total", "com.example.money.Money"),
                                 f("c", "com.example.money.Currency"))), refs)
    # The referenced types stay references in the canonical text, as Confluent prints them.
    assert schema.canonical() == ('{"type":"record","name":"Order","namespace":"com.example","fields":[{"name":'
                                  '"total","type":"com.example.money.Money"},{"name":"c","type":'
                                  '"com.example.money.Currency"}]}')
    assert "EUR" not in schema.normalized()
    with pytest.raises(SchemaError, match="undefined name"):
        parse_avro(text(rec("com.example.Order", f("total", "com.example.money.Money"))), {})


def test_reference_errors_name_the_reference() -> None:
    with pytest.raises(SchemaError, match="Currency"):
        parse_avro(text(rec(R, f("c", "Currency"))), {"Currency": '{"type":"enum","name":"Currency"}'})


def test_references_compared_through_their_definitions() -> None:
    refs_v1 = {"com.example.money.Currency": CURRENCY_V1}
    refs_v2 = {"com.example.money.Currency": CURRENCY_V2}
    body = text(rec(R, f("c", "com.example.money.Currency")))
    old, new = parse_avro(body, refs_v1), parse_avro(body, refs_v2)
    assert old.canonical() == new.canonical()  # same text; the references differ
    assert [e.kind for e in old.read_errors(new)] == ["MISSING_ENUM_SYMBOLS"]


# --- Apache Avro's Java library as the judge -----------------------------------------------------------

def _refs(version: Version) -> list[str]:
    return list(version.references.values())


def _pairs() -> list[tuple[str, Version, Version]]:
    """Every (reader, writer) pair the table's modes check: the newest version against each earlier."""
    pairs: list[tuple[str, Version, Version]] = []
    for c in CASES:
        *old, new = c.versions
        for i, version in enumerate(old, start=1):
            pairs.append((f"{c.name}: v{len(c.versions)} reads v{i}", new, version))
            pairs.append((f"{c.name}: v{i} reads v{len(c.versions)}", version, new))
    return pairs


def test_table_agrees_with_avro_java() -> None:
    """Every pair of the table, every schema's parse and canonical text, and the invalid and
    valid schemas above, judged by org.apache.avro (Schema.Parser, Schema.toString as Confluent
    calls it, SchemaCompatibility) in one JVM; ours must give the same answers."""
    pairs = _pairs()
    jobs: list[dict[str, Any]] = []
    for label, reader, writer in pairs:
        # Reader and writer each with their own references: a referenced type may evolve too.
        jobs.append({"id": label, "op": "compat", "reader": reader.schema, "writer": writer.schema,
                     "reader_refs": _refs(reader), "writer_refs": _refs(writer)})
    versions = {(v.schema, tuple(v.references.items())): v for c in CASES for v in c.versions}
    parse_jobs = [(v.schema, v.references) for v in versions.values()]
    parse_jobs += [(schema, {}) for _, schema in INVALID] + [(schema, {}) for schema in VALID]
    for schema, refs in parse_jobs:
        jobs.append({"id": schema, "op": "parse", "schema": schema, "refs": list(refs.values())})

    answers = avro_java.verdicts(jobs)

    disagreements: list[str] = []
    for (label, reader, writer), answer in zip(pairs, answers, strict=False):
        assert answer["ok"], f"{label}: Avro Java could not parse: {answer.get('error')}"
        ours = parse_avro(reader.schema, reader.references).read_errors(parse_avro(writer.schema, writer.references))
        java_kinds = sorted((i["type"], i["location"]) for i in answer["incompatibilities"])
        our_kinds = sorted((e.kind, e.path) for e in ours)
        if (answer["result"] == "COMPATIBLE") != (not ours) or java_kinds != our_kinds:
            disagreements.append(f"{label}: Avro Java {answer['result']} {answer['incompatibilities']}, "
                                 f"ours {[(e.kind, e.path) for e in ours]}")
    for (schema, refs), answer in zip(parse_jobs, answers[len(pairs):], strict=True):
        try:
            ours_text: str | None = parse_avro(schema, refs).canonical()
        except SchemaError as exc:
            ours_text = None
            error = str(exc)
        if not answer["ok"]:
            if ours_text is not None:
                disagreements.append(f"{schema}: Avro Java refuses ({answer['error']}), we accept")
        elif ours_text is None:
            disagreements.append(f"{schema}: Avro Java accepts, we refuse: {error}")
        elif ours_text != answer["canonical"]:
            disagreements.append(f"{schema}: canonical text differs:\n  java {answer['canonical']}\n  ours {ours_text}")
    assert not disagreements, "\n".join(disagreements)
    assert len(answers) == len(pairs) + len(parse_jobs)
