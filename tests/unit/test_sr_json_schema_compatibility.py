"""JSON Schema in the schema registry (issue #20): parsing per draft, canonical and normalized
forms, references, and the compatibility rules as a table run through every mode.

The table is kept honest by the data: for every pair the checker calls compatible, every sample
document the writer accepts must be accepted by the reader (``jsonschema`` validating both)."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

import pytest
from riverlog.schema_registry.compatibility import MODES, compatibility_errors
from riverlog.schema_registry.formats import Incompatibility, ParsedSchema, SchemaError, parse_schema
from riverlog.schema_registry.formats.json_schema import JsonSchema

pytestmark = pytest.mark.unit

D4 = "http://json-schema.org/draft-04/schema#"
D6 = "http://json-schema.org/draft-06/schema#"
D7 = "http://json-schema.org/draft-07/schema#"
D2019 = "https://json-schema.org/draft/2019-09/schema"
D2020 = "https://json-schema.org/draft/2020-12/schema"


def obj(props: dict[str, Any], *, required: tuple[str, ...] = (), closed: bool = False, **more: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props, **more}
    if required:
        schema["required"] = list(required)
    if closed:
        schema["additionalProperties"] = False
    return schema


STR: dict[str, Any] = {"type": "string"}
INT: dict[str, Any] = {"type": "integer"}
NUM: dict[str, Any] = {"type": "number"}


@dataclass
class Case:
    """Versions oldest first (a schema, or (schema, references)); the last is registered against
    the others. ``expect``: one flag per mode in MODES order, Y compatible, - not:
    NONE, BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, FULL, FULL_TRANSITIVE."""

    name: str
    versions: list[Any]
    expect: str
    docs: list[Any] = field(default_factory=list)
    # Confluent's rule: a required property with a default may be added (readers fill it in).
    fills_defaults: bool = False


# Sample documents every case is checked with, besides its own.
POOL: list[Any] = [None, True, 0, 1, -5, 7, 10, 11, 1.5, 100, "", "x", "hello", "hello world, a longer text",
                   [], [1], ["a"], [1, 2, 3], ["a", "b", "a"], {}, {"a": "x"}, {"a": 1}, {"a": "x", "b": 1},
                   {"a": "x", "b": "y"}, {"a": "x", "b": None}, {"b": 2}, {"a": "x", "c": True}]

CASES: list[Case] = [
    # --- properties in open, closed and partially open content models -------------------------
    Case("identical", [obj({"a": STR}), obj({"a": STR})], "YYYYYYY"),
    Case("open: property added", [obj({"a": STR}), obj({"a": STR, "b": INT})], "Y--YY--"),
    Case("open: property with empty schema added", [obj({"a": STR}), obj({"a": STR, "b": {}})], "YYYYYYY"),
    Case("open: property removed", [obj({"a": STR, "b": INT}), obj({"a": STR})], "YYY----"),
    Case("closed: optional property added", [obj({"a": STR}, closed=True), obj({"a": STR, "b": INT}, closed=True)],
         "YYY----"),
    Case("closed: required property added", [obj({"a": STR}, closed=True),
                                             obj({"a": STR, "b": INT}, required=("b",), closed=True)], "Y------"),
    Case("closed: required property with default added",
         [obj({"a": STR}, closed=True), obj({"a": STR, "b": {**INT, "default": 0}}, required=("b",), closed=True)],
         "YYY----", fills_defaults=True),
    Case("closed: property removed", [obj({"a": STR, "b": INT}, closed=True), obj({"a": STR}, closed=True)], "Y--YY--"),
    Case("closed: false property removed", [obj({"a": STR, "b": False}, closed=True), obj({"a": STR}, closed=True)],
         "YYYYYYY"),
    Case("open becomes closed", [obj({"a": STR}), obj({"a": STR}, closed=True)], "Y--YY--"),
    Case("closed becomes open", [obj({"a": STR}, closed=True), obj({"a": STR})], "YYY----"),
    Case("partially open: added property covered", [obj({"a": STR}, additionalProperties=STR),
                                                    obj({"a": STR, "b": STR}, additionalProperties=STR)], "YYYYYYY",
         [{"a": "x", "b": "y", "z": "w"}]),
    Case("partially open: added property not covered", [obj({"a": STR}, additionalProperties=STR),
                                                        obj({"a": STR, "b": INT}, additionalProperties=STR)], "Y------",
         [{"a": "x", "b": 3}]),
    Case("additionalProperties narrowed to a schema", [obj({"a": STR}), obj({"a": STR}, additionalProperties=STR)],
         "Y--YY--", [{"a": "x", "z": "w"}]),
    Case("additionalProperties schema widened", [obj({"a": STR}, additionalProperties=STR),
                                                 obj({"a": STR}, additionalProperties={"type": ["string", "number"]})],
         "YYY----", [{"a": "x", "z": 4}]),
    Case("patternProperties added to an open model", [obj({"a": STR}),
                                                      obj({"a": STR}, patternProperties={"^x_": INT})], "Y--YY--",
         [{"a": "x", "x_1": 1}, {"a": "x", "x_1": "s"}]),
    Case("patternProperties schema widened", [obj({}, patternProperties={"^x_": INT}),
                                              obj({}, patternProperties={"^x_": NUM})], "YYY----",
         [{"x_1": 1}, {"x_1": 1.5}]),
    Case("closed with patternProperties: property matching the pattern removed",
         [obj({"x_id": INT}, closed=True, patternProperties={"^x_": NUM}),
          obj({}, closed=True, patternProperties={"^x_": NUM})], "YYY----", [{"x_id": 1}, {"x_n": 2.5}, {"x_id": 1.5}]),
    # --- required ------------------------------------------------------------------------------
    Case("required added", [obj({"a": STR, "b": INT}), obj({"a": STR, "b": INT}, required=("b",))], "Y--YY--"),
    Case("required removed", [obj({"a": STR, "b": INT}, required=("a",)), obj({"a": STR, "b": INT})], "YYY----"),
    Case("required added with a default", [obj({"a": STR, "b": INT}), obj({"a": STR, "b": {**INT, "default": 1}},
                                                                      required=("b",))],
         "YYYYYYY", fills_defaults=True),
    # --- types ---------------------------------------------------------------------------------
    Case("integer to number", [INT, NUM], "YYY----"),
    Case("number to integer", [NUM, INT], "Y--YY--"),
    Case("null added to a type array", [STR, {"type": ["string", "null"]}], "YYY----"),
    Case("type array narrowed", [{"type": ["string", "integer", "null"]}, {"type": ["string", "integer"]}],
         "Y--YY--"),
    Case("string to integer", [STR, INT], "Y------"),
    Case("any (true) to a type", [True, STR], "Y--YY--"),
    Case("property type integer to number", [obj({"n": INT}), obj({"n": NUM})], "YYY----", [{"n": 2}, {"n": 2.5}]),
    # --- string limits -------------------------------------------------------------------------
    Case("maxLength increased", [{**STR, "maxLength": 5}, {**STR, "maxLength": 10}], "YYY----", ["abcdefg"]),
    Case("maxLength added", [STR, {**STR, "maxLength": 5}], "Y--YY--"),
    Case("maxLength removed", [{**STR, "maxLength": 5}, STR], "YYY----"),
    Case("minLength increased", [{**STR, "minLength": 1}, {**STR, "minLength": 3}], "Y--YY--"),
    Case("pattern added", [STR, {**STR, "pattern": "^[a-z]+$"}], "Y--YY--", ["ABC"]),
    Case("pattern changed", [{**STR, "pattern": "^[a-z]+$"}, {**STR, "pattern": "^[a-z0-9]+$"}], "Y------", ["a1"]),
    Case("pattern removed", [{**STR, "pattern": "^[a-z]+$"}, STR], "YYY----"),
    Case("format added (an annotation)", [STR, {**STR, "format": "email"}], "YYYYYYY"),
    Case("title and description changed", [{**STR, "title": "A"}, {**STR, "title": "B", "description": "b"}],
         "YYYYYYY"),
    # --- number limits -------------------------------------------------------------------------
    Case("minimum decreased", [{**NUM, "minimum": 0}, {**NUM, "minimum": -10}], "YYY----"),
    Case("maximum decreased", [{**NUM, "maximum": 100}, {**NUM, "maximum": 50}], "Y--YY--", [75]),
    Case("exclusiveMaximum becomes maximum (draft 7)", [{**NUM, "exclusiveMaximum": 10}, {**NUM, "maximum": 10}],
         "YYY----", [9.99]),
    Case("integer maximum 10 equals exclusiveMaximum 11", [{**INT, "maximum": 10}, {**INT, "exclusiveMaximum": 11}],
         "YYYYYYY"),
    Case("draft-04 exclusive flag dropped", [{"$schema": D4, **NUM, "maximum": 10, "exclusiveMaximum": True},
                                             {"$schema": D4, **NUM, "maximum": 10}], "YYY----", [9.5]),
    Case("multipleOf reduced 4 -> 2", [{**INT, "multipleOf": 4}, {**INT, "multipleOf": 2}], "YYY----", [4, 8, 6]),
    Case("multipleOf added", [INT, {**INT, "multipleOf": 5}], "Y--YY--", [5, 15]),
    Case("multipleOf 0.5 -> 0.25", [{**NUM, "multipleOf": 0.5}, {**NUM, "multipleOf": 0.25}], "YYY----",
         [2.5, 0.75]),
    # --- enums ---------------------------------------------------------------------------------
    Case("enum extended", [{"enum": ["a", "b"]}, {"enum": ["a", "b", "c"]}], "YYY----", ["a", "b", "c"]),
    Case("enum narrowed", [{"enum": ["a", "b", "c"]}, {"enum": ["a", "b"]}], "Y--YY--", ["a", "c"]),
    Case("enum changed", [{"enum": ["a", "b"]}, {"enum": ["a", "c"]}], "Y------", ["a", "b", "c"]),
    Case("const widened to an enum", [{"const": "v1"}, {"enum": ["v1", "v2"]}], "YYY----", ["v1", "v2"]),
    Case("enum dropped, its type kept", [{**STR, "enum": ["a", "b"]}, STR], "YYY----", ["a", "b"]),
    Case("enum added to a string", [STR, {**STR, "enum": ["a"]}], "Y--YY--", ["a"]),
    # --- arrays --------------------------------------------------------------------------------
    Case("items integer to number", [{"type": "array", "items": INT}, {"type": "array", "items": NUM}], "YYY----",
         [[1.5], [1, 2]]),
    Case("items added", [{"type": "array"}, {"type": "array", "items": STR}], "Y--YY--"),
    Case("maxItems decreased", [{"type": "array", "maxItems": 10}, {"type": "array", "maxItems": 2}], "Y--YY--"),
    Case("minItems removed", [{"type": "array", "minItems": 1}, {"type": "array"}], "YYY----"),
    Case("uniqueItems added", [{"type": "array"}, {"type": "array", "uniqueItems": True}], "Y--YY--"),
    Case("tuple item added to a closed tuple (draft 7)",
         [{"type": "array", "items": [STR, INT], "additionalItems": False},
          {"type": "array", "items": [STR, INT, {"type": "boolean"}], "additionalItems": False}], "YYY----",
         [["a", 1], ["a", 1, True]]),
    Case("tuple opened (2020-12 prefixItems)",
         [{"$schema": D2020, "type": "array", "prefixItems": [STR], "items": False},
          {"$schema": D2020, "type": "array", "prefixItems": [STR]}], "YYY----", [["a"], ["a", 1]]),
    Case("contains added", [{"type": "array"}, {"type": "array", "contains": INT}], "Y--YY--"),
    # --- combined types ------------------------------------------------------------------------
    Case("anyOf branch added", [{"anyOf": [STR, INT]}, {"anyOf": [STR, INT, {"type": "null"}]}], "YYY----"),
    Case("oneOf branch removed", [{"oneOf": [STR, INT, {"type": "null"}]}, {"oneOf": [STR, INT]}], "Y--YY--"),
    Case("allOf member added", [{"allOf": [STR]}, {"allOf": [STR, {"maxLength": 3}]}], "Y--YY--"),
    Case("anyOf becomes oneOf", [{"anyOf": [STR, INT]}, {"oneOf": [STR, INT]}], "Y--YY--"),
    Case("string becomes anyOf string/null", [STR, {"anyOf": [STR, {"type": "null"}]}], "YYY----"),
    Case("oneOf branch widened", [{"oneOf": [{**STR, "maxLength": 3}, INT]}, {"oneOf": [STR, INT]}], "YYY----"),
    Case("not widened", [{"not": {"type": "null"}}, {"not": {"type": ["null", "boolean"]}}], "Y--YY--"),
    # --- references and nesting ---------------------------------------------------------------
    Case("$ref'd definition widened",
         [{"definitions": {"name": {**STR, "maxLength": 5}}, **obj({"n": {"$ref": "#/definitions/name"}})},
          {"definitions": {"name": {**STR, "maxLength": 50}}, **obj({"n": {"$ref": "#/definitions/name"}})}],
         "YYY----", [{"n": "abc"}, {"n": "abcdefgh"}]),
    Case("$defs closed object gains an optional property (2020-12)",
         [{"$schema": D2020, "$defs": {"p": obj({"x": INT}, closed=True)}, **obj({"p": {"$ref": "#/$defs/p"}})},
          {"$schema": D2020, "$defs": {"p": obj({"x": INT, "y": INT}, closed=True)},
           **obj({"p": {"$ref": "#/$defs/p"}})}], "YYY----", [{"p": {"x": 1}}, {"p": {"x": 1, "y": 2}}]),
    Case("nested open object gains a property",
         [obj({"addr": obj({"city": STR})}), obj({"addr": obj({"city": STR, "zip": STR})})], "Y--YY--",
         [{"addr": {"city": "c", "zip": 1}}, {"addr": {"city": "c", "zip": "z"}}]),
    Case("nested required removed", [obj({"addr": obj({"city": STR}, required=("city",))}),
                                     obj({"addr": obj({"city": STR})})], "YYY----",
         [{"addr": {"city": "c"}}, {"addr": {}}]),
    Case("recursive tree: value widened",
         [obj({"v": INT, "kids": {"type": "array", "items": {"$ref": "#"}}}),
          obj({"v": NUM, "kids": {"type": "array", "items": {"$ref": "#"}}})], "YYY----",
         [{"v": 1, "kids": [{"v": 2, "kids": []}]}, {"v": 1, "kids": [{"v": 2.5}]}]),
    Case("external reference widened",
         [(obj({"c": {"$ref": "customer.json"}}), {"customer.json": json.dumps(obj({"id": INT}, closed=True))}),
          (obj({"c": {"$ref": "customer.json"}}), {"customer.json": json.dumps(obj({"id": NUM}, closed=True))})],
         "YYY----", [{"c": {"id": 1}}, {"c": {"id": 1.5}}]),
    # --- objects: dependencies, limits, names --------------------------------------------------
    Case("dependencies array added (draft 7)", [obj({"a": STR, "b": INT}),
                                                obj({"a": STR, "b": INT}, dependencies={"a": ["b"]})], "Y--YY--"),
    Case("dependentRequired narrowed (2019-09)",
         [{"$schema": D2019, **obj({"a": STR, "b": INT, "c": INT}, dependentRequired={"a": ["b", "c"]})},
          {"$schema": D2019, **obj({"a": STR, "b": INT, "c": INT}, dependentRequired={"a": ["b"]})}], "YYY----",
         [{"a": "x", "b": 1, "c": 2}, {"a": "x", "b": 1}]),
    Case("dependentSchemas removed (2020-12)",
         [{"$schema": D2020, **obj({"a": STR}, dependentSchemas={"a": {"required": ["b"]}})},
          {"$schema": D2020, **obj({"a": STR})}], "YYY----"),
    Case("minProperties added", [obj({}), obj({}, minProperties=1)], "Y--YY--"),
    Case("maxProperties increased", [obj({}, maxProperties=1), obj({}, maxProperties=3)], "YYY----"),
    Case("propertyNames added", [obj({}), obj({}, propertyNames={"maxLength": 1})], "Y--YY--",
         [{"long": 1}, {"a": 1}]),
    Case("if/then added", [obj({"kind": STR, "a": STR}),
                           obj({"kind": STR, "a": STR}, **{"if": obj({"kind": {"const": "k"}}, required=("kind",)),
                                                       "then": {"required": ["a"]}})], "Y--YY--",
         [{"kind": "k"}, {"kind": "k", "a": "x"}]),
    # --- drafts --------------------------------------------------------------------------------
    Case("draft-04 to 2020-12, same meaning",
         [{"$schema": D4, **obj({"n": {**INT, "minimum": 0}}, required=("n",))},
          {"$schema": D2020, **obj({"n": {**INT, "minimum": 0}}, required=("n",))}], "YYYYYYY", [{"n": 3}]),
    Case("draft-06 exclusiveMinimum to draft-04 flag",
         [{"$schema": D6, **NUM, "exclusiveMinimum": 0},
          {"$schema": D4, **NUM, "minimum": 0, "exclusiveMinimum": True}],
         "YYYYYYY", [0.5]),
    Case("draft 2019-09 $ref with siblings tightened",
         [{"$schema": D2019, "$defs": {"s": STR}, "$ref": "#/$defs/s"},
          {"$schema": D2019, "$defs": {"s": STR}, "$ref": "#/$defs/s", "maxLength": 3}], "Y--YY--"),
    # --- three versions: the transitive modes look further back --------------------------------
    Case("v2 changed type under NONE, v3 widens v2",
         [INT, STR, {"type": ["string", "null"]}], "YY-----"),
    Case("closed model grows by optional properties", [obj({"a": STR}, closed=True),
                                                       obj({"a": STR, "b": INT}, closed=True),
                                                       obj({"a": STR, "b": INT, "c": INT}, closed=True)], "YYY----",
         [{"a": "x", "b": 1, "c": 2}]),
    Case("v3 narrows v2 but not v1", [NUM, STR, {**STR, "maxLength": 5}], "Y--Y---"),
    Case("v3 equals v2, v1 differs", [INT, STR, {**STR, "title": "renamed"}], "YY-Y-Y-"),
    Case("open model grows: forward transitively", [obj({"a": STR}), obj({"a": STR, "b": STR}),
                                                    obj({"a": STR, "b": STR, "c": INT})], "Y--YY--",
         [{"a": "x", "b": "y", "c": 1}]),
    Case("maxLength 10, 20, then 15", [{**STR, "maxLength": 10}, {**STR, "maxLength": 20}, {**STR, "maxLength": 15}],
         "Y--Y---", ["a" * 12, "a" * 18]),
]


def parse(version: Any) -> JsonSchema:
    schema, refs = version if isinstance(version, tuple) else (version, {})
    parsed = parse_schema("JSON", json.dumps(schema), refs)
    assert isinstance(parsed, JsonSchema)
    return parsed


def test_table_is_large_and_well_formed() -> None:
    assert len(CASES) >= 50
    assert len({c.name for c in CASES}) == len(CASES)
    for case in CASES:
        assert len(case.expect) == len(MODES) and set(case.expect) <= {"Y", "-"}, case.name
        assert case.expect[0] == "Y", case.name  # NONE accepts everything
        flags = dict(zip(MODES, case.expect, strict=True))
        # FULL is BACKWARD and FORWARD, against the latest or against all.
        assert (flags["FULL"] == "Y") == (flags["BACKWARD"] == flags["FORWARD"] == "Y"), case.name
        assert (flags["FULL_TRANSITIVE"] == "Y") == (
            flags["BACKWARD_TRANSITIVE"] == flags["FORWARD_TRANSITIVE"] == "Y"), case.name
        if len(case.versions) == 2:
            assert case.expect[1:3] in ("YY", "--") and case.expect[3:5] in ("YY", "--"), case.name


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_compatibility_table(case: Case) -> None:
    versions = [parse(v) for v in case.versions]
    earlier = list(enumerate(versions[:-1], start=1))
    got = "".join("Y" if not compatibility_errors(mode, versions[-1], earlier) else "-" for mode in MODES)
    assert got == case.expect, {mode: compatibility_errors(mode, versions[-1], earlier) for mode in MODES}


def _with_defaults(doc: Any, schema: Any) -> Any:
    # What a reader that fills defaults (Confluent's deserializer with defaults) sees.
    if not isinstance(doc, dict) or not isinstance(schema, dict):
        return doc
    filled = dict(doc)
    for name, prop in schema.get("properties", {}).items():
        if isinstance(prop, dict) and "default" in prop and name not in filled:
            filled[name] = prop["default"]
    return filled


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_compatible_means_the_reader_accepts_the_writers_documents(case: Case) -> None:
    """Whenever the checker says a reader can read a writer, every sample document the writer
    accepts is accepted by the reader: the table's "Y"s are backed by the data."""
    versions = [parse(v) for v in case.versions]
    raw = [v[0] if isinstance(v, tuple) else v for v in case.versions]
    docs = POOL + case.docs
    for version in versions:
        assert any(version.accepts(d) for d in docs), f"{case.name}: no sample fits {version.canonical()}"
    checked = 0
    for wi, writer in enumerate(versions):
        for ri, reader in enumerate(versions):
            if wi == ri or reader.read_errors(writer):
                continue
            for doc in docs:
                if writer.accepts(doc):
                    seen = _with_defaults(doc, raw[ri]) if case.fills_defaults else doc
                    assert reader.accepts(seen), (case.name, f"v{ri + 1} reads v{wi + 1}", doc)
                    checked += 1
    if "Y" in case.expect[1:]:
        assert checked, case.name


def test_incompatible_changes_have_a_witness_where_the_data_shows_it() -> None:
    """The other direction, where a sample shows it: most "incompatible" verdicts are backed by a
    document the writer accepts and the reader rejects (the rest are rules that cannot be decided,
    e.g. a pattern changed, or Confluent's conservative ones)."""
    witnessed = verdicts = 0
    for case in CASES:
        versions = [parse(v) for v in case.versions]
        for wi, writer in enumerate(versions):
            for ri, reader in enumerate(versions):
                if wi != ri and reader.read_errors(writer):
                    verdicts += 1
                    docs = POOL + case.docs
                    witnessed += any(writer.accepts(d) and not reader.accepts(d) for d in docs)
    assert verdicts and witnessed / verdicts > 0.8, (witnessed, verdicts)


# --- the error names, for the main rules ------------------------------------------------------


def kinds(writer: Any, reader: Any) -> list[str]:
    return [e.kind for e in parse(reader).read_errors(parse(writer))]


@pytest.mark.parametrize(("writer", "reader", "expected"), [
    (obj({"a": STR}), obj({"a": STR, "b": INT}), ["OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"]),
    (obj({"a": STR}), obj({"a": STR, "b": INT}, required=("b",)), ["REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"]),
    (obj({"a": STR}, closed=True), obj({"a": STR, "b": INT}, required=("b",), closed=True),
     ["REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"]),
    (obj({"a": STR, "b": INT}, closed=True), obj({"a": STR}, closed=True),
     ["PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"]),
    (obj({"a": STR, "b": INT}), obj({"a": STR, "b": INT}, required=("b",)), ["REQUIRED_ATTRIBUTE_ADDED"]),
    (NUM, INT, ["TYPE_NARROWED"]),
    (STR, INT, ["TYPE_CHANGED"]),
    ({**STR, "maxLength": 5}, {**STR, "maxLength": 3}, ["MAX_LENGTH_DECREASED"]),
    (STR, {**STR, "minLength": 2}, ["MIN_LENGTH_ADDED"]),
    ({**NUM, "minimum": 0}, {**NUM, "minimum": 1}, ["MINIMUM_INCREASED"]),
    ({**NUM, "exclusiveMaximum": 5}, {**NUM, "exclusiveMaximum": 4}, ["EXCLUSIVE_MAXIMUM_DECREASED"]),
    ({**INT, "multipleOf": 2}, {**INT, "multipleOf": 4}, ["MULTIPLE_OF_EXPANDED"]),
    ({"enum": [1, 2]}, {"enum": [1]}, ["ENUM_ARRAY_NARROWED"]),
    ({"enum": [1, 2]}, {"enum": [1, 3]}, ["ENUM_ARRAY_CHANGED"]),
    (obj({}), obj({}, additionalProperties=False), ["ADDITIONAL_PROPERTIES_REMOVED"]),
    (obj({}), obj({}, additionalProperties=STR), ["ADDITIONAL_PROPERTIES_NARROWED"]),
    ({"type": "array"}, {"type": "array", "maxItems": 3}, ["MAX_ITEMS_ADDED"]),
    ({"type": "array"}, {"type": "array", "uniqueItems": True}, ["UNIQUE_ITEMS_ADDED"]),
    ({"anyOf": [STR, INT, NUM]}, {"anyOf": [STR, INT]}, ["SUM_TYPE_NARROWED"]),
    ({"anyOf": [STR, INT]}, {"oneOf": [STR, INT]}, ["COMBINED_TYPE_CHANGED"]),
    ({"not": STR}, {"not": {"type": ["string", "null"]}}, ["NOT_TYPE_EXTENDED"]),
    (obj({"a": STR}), obj({"a": STR}, dependencies={"a": ["b"]}), ["DEPENDENCY_ARRAY_ADDED"]),
])
def test_error_kinds(writer: Any, reader: Any, expected: list[str]) -> None:
    assert kinds(writer, reader) == expected


def test_error_names_the_path_and_reads_as_confluents_verbose_message() -> None:
    errors = parse(obj({"a": obj({"b": {**STR, "maxLength": 3}})})).read_errors(
        parse(obj({"a": obj({"b": {**STR, "maxLength": 9}})})))
    assert [(e.kind, e.path) for e in errors] == [("MAX_LENGTH_DECREASED", "#/properties/a/properties/b/maxLength")]
    assert str(errors[0]).startswith("{errorType:'MAX_LENGTH_DECREASED', description:'")
    messages = compatibility_errors("BACKWARD", parse(STR), [(1, parse(INT)), (2, parse({**STR, "maxLength": 3}))])
    assert messages == []
    messages = compatibility_errors("BACKWARD_TRANSITIVE", parse(STR), [(1, parse(INT)), (2, parse(STR))])
    assert any("TYPE_CHANGED" in m for m in messages) and "{oldSchemaVersion: 1}" in messages


# --- parsing ----------------------------------------------------------------------------------

DRAFTS = [("4", D4), ("6", D6), ("7", D7), ("2019-09", D2019), ("2020-12", D2020)]


@pytest.mark.parametrize(("name", "url"), DRAFTS)
def test_each_draft_parses_and_validates(name: str, url: str) -> None:
    schema = parse({"$schema": url, **obj({"n": {**INT, "minimum": 0}}, required=("n",))})
    assert schema.draft == name
    assert schema.accepts({"n": 1}) and not schema.accepts({"n": -1}) and not schema.accepts({})


def test_draft_defaults_to_7_and_accepts_url_spellings() -> None:
    assert parse(STR).draft == "7"
    assert parse({"$schema": "https://json-schema.org/draft-07/schema", **STR}).draft == "7"
    assert parse({"$schema": "http://json-schema.org/draft/2020-12/schema#", **STR}).draft == "2020-12"


@pytest.mark.parametrize(("url", "bad", "says"), [
    (D4, {"type": "object", "maximum": 3, "exclusiveMaximum": 2}, "exclusiveMaximum"),  # draft 4: a flag
    (D4, {"type": "objekt"}, "type"),
    (D6, {"type": "number", "exclusiveMinimum": True}, "exclusiveMinimum"),  # draft 6: a number
    (D6, {"required": "a"}, "required"),
    (D7, {"minLength": -1}, "minLength"),
    (D7, {"properties": {"a": {"type": 5}}}, "properties/a/type"),
    (D2019, {"dependentRequired": {"a": "b"}}, "dependentRequired"),
    (D2019, {"anyOf": []}, "anyOf"),
    (D2020, {"prefixItems": {"type": "string"}}, "prefixItems"),
    (D2020, {"$defs": {"x": {"enum": "notalist"}}}, "$defs/x/enum"),
])
def test_schema_failing_its_meta_schema_is_refused(url: str, bad: dict[str, Any], says: str) -> None:
    with pytest.raises(SchemaError, match="not a valid draft") as refused:
        parse({"$schema": url, **bad})
    assert says in str(refused.value)


def test_draft4_has_no_boolean_schemas_and_later_drafts_do() -> None:
    with pytest.raises(SchemaError):
        parse({"$schema": D4, "properties": {"a": False}})
    assert not parse({"$schema": D6, "properties": {"a": False}}).accepts({"a": 1})
    assert parse(True).accepts(42)


@pytest.mark.parametrize(("text", "says"), [
    ("{", "invalid JSON"),
    ('{"type": "string",}', "invalid JSON"),
    ("", "invalid JSON"),
    ("[1, 2]", "object or a boolean"),
    ('"string"', "object or a boolean"),
    ('{"$schema": "http://json-schema.org/draft-03/schema#"}', "unknown $schema"),
    ('{"$schema": "https://example.com/my-meta"}', "unknown $schema"),
    ('{"$ref": "#/definitions/missing"}', "unresolvable $ref"),
    ('{"properties": {"a": {"$ref": "customer.json"}}}', "unresolvable $ref"),
    ('{"$ref": "https://example.com/remote.json"}', "unresolvable $ref"),  # never fetched
])
def test_invalid_texts_are_schema_errors(text: str, says: str) -> None:
    with pytest.raises(SchemaError, match=f"(?i){says.replace('$', '[$]')}"):
        parse_schema("JSON", text)


@pytest.mark.parametrize("schema", [
    {"anyOf": [{"$ref": "#"}, STR]},
    {"enum": [1], "allOf": [{"$ref": "#"}]},
    {"definitions": {"a": {"$ref": "#/definitions/b"}, "b": {"$ref": "#/definitions/a"}}, "$ref": "#/definitions/a"},
    {"$schema": D2019, "$ref": "#", "type": "string"},
])
def test_a_schema_referring_to_itself_without_end_is_refused(schema: dict[str, Any]) -> None:
    # Validating anything with it would never end (jsonschema recurses until the stack is gone).
    with pytest.raises(SchemaError, match="refers to itself without end"):
        parse(schema)


def test_a_property_named_ref_and_refs_in_data_are_not_references() -> None:
    schema = parse(obj({"$ref": STR}, default={"$ref": "nowhere"}, examples=[{"$ref": "x"}]))
    assert schema.accepts({"$ref": "text"}) and not schema.accepts({"$ref": 1})


# --- references -------------------------------------------------------------------------------

CUSTOMER = json.dumps(obj({"name": STR, "id": INT}, required=("id",)))


def test_reference_by_relative_name() -> None:
    order = parse((obj({"customer": {"$ref": "customer.json"}}), {"customer.json": CUSTOMER}))
    assert order.accepts({"customer": {"id": 1}}) and not order.accepts({"customer": {"name": "x"}})


def test_reference_by_absolute_url_and_relative_to_the_schemas_id() -> None:
    url = "https://example.com/schemas/customer.schema.json"
    by_url = parse((obj({"c": {"$ref": url}}), {url: CUSTOMER}))
    assert not by_url.accepts({"c": {}})
    # A $ref relative to the schema's $id, the reference named by its full URL...
    relative = parse(({"$id": "https://example.com/schemas/order.json", **obj({"c": {"$ref": "customer.schema.json"}})},
                      {url: CUSTOMER}))
    assert not relative.accepts({"c": {}})
    # ... or by the name the $ref uses.
    named = parse(({"$id": "https://example.com/schemas/order.json", **obj({"c": {"$ref": "customer.schema.json"}})},
                   {"customer.schema.json": CUSTOMER}))
    assert named.accepts({"c": {"id": 2}}) and not named.accepts({"c": {}})


def test_reference_into_a_referenced_schemas_definitions_and_nested_references() -> None:
    money = obj({"cents": INT, "currency": {**STR, "maxLength": 3}}, required=("cents",))
    common = json.dumps({"$defs": {"money": money}})
    line = json.dumps(obj({"price": {"$ref": "common.json#/$defs/money"}}))
    order = parse((obj({"lines": {"type": "array", "items": {"$ref": "line.json"}}}),
                   {"common.json": common, "line.json": line}))
    assert order.accepts({"lines": [{"price": {"cents": 5, "currency": "EUR"}}]})
    assert not order.accepts({"lines": [{"price": {"currency": "EURO"}}]})


def test_a_reference_that_is_not_a_schema_is_refused() -> None:
    with pytest.raises(SchemaError, match="reference 'customer.json'.*invalid JSON"):
        parse((obj({"c": {"$ref": "customer.json"}}), {"customer.json": "{nope"}))
    with pytest.raises(SchemaError, match="reference 'customer.json'.*not a valid draft 7"):
        parse((obj({"c": {"$ref": "customer.json"}}), {"customer.json": '{"type": 3}'}))
    with pytest.raises(SchemaError, match="reference 'customer.json'.*unresolvable"):
        parse((obj({"c": {"$ref": "customer.json"}}), {"customer.json": '{"$ref": "address.json"}'}))


def test_compatibility_follows_references_into_their_texts() -> None:
    narrow = parse((obj({"c": {"$ref": "customer.json"}}), {"customer.json": json.dumps(obj({"id": INT}))}))
    wide = parse((obj({"c": {"$ref": "customer.json"}}), {"customer.json": json.dumps(obj({"id": NUM}))}))
    assert wide.read_errors(narrow) == []
    assert [e.kind for e in narrow.read_errors(wide)] == ["TYPE_NARROWED"]


# --- canonical and normalized forms --------------------------------------------------------------


def test_canonical_is_compact_with_keys_as_given_and_stable() -> None:
    text = '{\n  "type": "object",\n  "properties": {"b": {"type": "string"}, "a": {"type": "integer"}},\n' \
           '  "title": "Unicodé"\n}'
    canonical = parse_schema("JSON", text).canonical()
    assert canonical == ('{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"}},'
                         '"title":"Unicodé"}')
    assert parse_schema("JSON", canonical).canonical() == canonical
    assert parse_schema("JSON", json.dumps(json.loads(text), indent=8)).canonical() == canonical


def test_normalized_sorts_keys_so_reordered_schemas_are_equal() -> None:
    one = parse_schema("JSON", '{"type": "object", "properties": {"b": {"type": "string"}, "a": {"maxLength": 2}}}')
    two = parse_schema("JSON", '{"properties": {"a": {"maxLength": 2}, "b": {"type": "string"}}, "type": "object"}')
    assert one.canonical() != two.canonical() and one != two
    assert one.normalized() == two.normalized()
    assert one.normalized() == '{"properties":{"a":{"maxLength":2},"b":{"type":"string"}},"type":"object"}'
    # Arrays keep their order (Confluent's normalize sorts object keys only).
    assert parse(obj({}, required=("b", "a"))).normalized() != parse(obj({}, required=("a", "b"))).normalized()


def test_schema_type_and_equality() -> None:
    assert parse(STR).schema_type == "JSON"
    assert parse(STR) == parse_schema("JSON", ' { "type" : "string" } ')
    assert hash(parse(STR)) == hash(parse_schema("JSON", '{"type":"string"}'))


def test_a_json_schema_cannot_read_another_type() -> None:
    class Other(ParsedSchema):
        schema_type = "AVRO"

        def canonical(self) -> str:
            return '"string"'

        normalized = canonical

        def read_errors(self, writer: ParsedSchema) -> list[Incompatibility]:
            return []

    assert [e.kind for e in parse(STR).read_errors(Other())] == ["TYPE_CHANGED"]


# --- random schemas: "compatible" never lets a writer's document through to a reader that rejects it


def _random_scalar(rnd: random.Random) -> dict[str, Any]:
    kind = rnd.choice(["string", "integer", "number", "boolean", "null", "enum"])
    if kind == "enum":
        return {"enum": rnd.sample(["a", "b", 1, 2, None, True], 3)}
    schema: dict[str, Any] = {"type": kind if rnd.random() < 0.8 else [kind, "null"]}
    if kind == "string" and rnd.random() < 0.5:
        schema[rnd.choice(["maxLength", "minLength"])] = rnd.randint(0, 4)
    if kind in ("integer", "number") and rnd.random() < 0.6:
        schema[rnd.choice(["maximum", "exclusiveMinimum", "multipleOf"])] = rnd.choice([1, 2, 4, 0.5])
    return schema


def _random_schema(rnd: random.Random, depth: int = 0) -> dict[str, Any]:
    roll = rnd.random()
    if depth > 2 or roll < 0.35:
        return _random_scalar(rnd)
    if roll < 0.65:
        props = {k: _random_schema(rnd, depth + 1) for k in rnd.sample("abc", rnd.randint(0, 3))}
        schema: dict[str, Any] = obj(props, required=tuple(sorted(props)[:1]) if rnd.random() < 0.4 else ())
        model = rnd.random()
        if model < 0.3:
            schema["additionalProperties"] = False
        elif model < 0.45:
            schema["additionalProperties"] = _random_scalar(rnd)
        elif model < 0.55:
            schema["patternProperties"] = {"^[ab]": _random_scalar(rnd)}
        return schema
    if roll < 0.85:
        return {"type": "array", "items": _random_schema(rnd, depth + 1), **({"maxItems": 2} if roll < 0.7 else {})}
    # oneOf is left out: its exclusivity is not checked (as in Confluent), see the docs.
    return {rnd.choice(["anyOf", "allOf"]): [_random_schema(rnd, depth + 1) for _ in range(rnd.randint(1, 3))]}


def _random_change(rnd: random.Random, schema: Any) -> Any:
    if not isinstance(schema, dict) or rnd.random() < 0.25:
        return _random_schema(rnd, 1)
    changed = json.loads(json.dumps(schema))
    if changed.get("properties") and rnd.random() < 0.6:
        name = rnd.choice(sorted(changed["properties"]))
        if rnd.random() < 0.3:
            del changed["properties"][name]
        else:
            changed["properties"][name] = _random_change(rnd, changed["properties"][name])
    elif "items" in changed and rnd.random() < 0.6:
        changed["items"] = _random_change(rnd, changed["items"])
    elif rnd.random() < 0.5:
        changed.pop(rnd.choice(sorted(changed)))
    else:
        changed.update({k: v for k, v in _random_scalar(rnd).items() if k != "type"})
    return changed


def _random_doc(rnd: random.Random, depth: int = 0) -> Any:
    roll = rnd.random()
    if depth > 2 or roll < 0.5:
        return rnd.choice([None, True, 0, 1, 2, 4, -1, 0.5, 1.5, "", "a", "b", "ab", "abcde"])
    if roll < 0.8:
        return {k: _random_doc(rnd, depth + 1) for k in rnd.sample("abcd", rnd.randint(0, 3))}
    return [_random_doc(rnd, depth + 1) for _ in range(rnd.randint(0, 3))]


def test_random_schema_changes_called_compatible_keep_every_document() -> None:
    rnd = random.Random(20)
    compatible = 0
    for _ in range(300):
        old = _random_schema(rnd)
        new = _random_change(rnd, old)
        try:
            pair = [parse(old), parse(new)]
        except SchemaError:
            continue  # a change that made an invalid schema (e.g. an empty enum)
        for writer, reader in (pair, pair[::-1]):
            if reader.read_errors(writer):
                continue
            compatible += 1
            for _ in range(100):
                doc = _random_doc(rnd)
                assert not writer.accepts(doc) or reader.accepts(doc), (writer.canonical(), reader.canonical(), doc)
    assert compatible > 100
