"""PROTOBUF schemas in Riverlog's schema registry (issue #20): parsing with references and
well-known imports, validation, canonical and normalized text, the base64 FileDescriptorProto
form confluent-kafka sends, and Confluent's Protobuf compatibility rules under every mode.

Where the table says a reader can read a writer's data, test_table_readable_cases_decode checks
it against the real thing: both schemas are compiled by the ``protobuf`` package (from our own
FileDescriptorProto encoding), a message written with one is parsed with the other."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

import pytest
from riverlog.schema_registry.compatibility import MODES, compatibility_errors
from riverlog.schema_registry.formats import SchemaError, parse_schema
from riverlog.schema_registry.formats.protobuf import ProtobufSchema
from riverlog.schema_registry.formats.protobuf_known import KNOWN_FILES

pytestmark = pytest.mark.unit

P3 = 'syntax = "proto3";\npackage t;\n'
P2 = 'syntax = "proto2";\npackage t;\n'


def m3(body: str, extra: str = "") -> str:
    return f"{P3}{extra}\nmessage M {{\n{body}\n}}\n"


def m2(body: str, extra: str = "") -> str:
    return f"{P2}{extra}\nmessage M {{\n{body}\n}}\n"


def parse(text: str, refs: dict[str, str] | None = None) -> ProtobufSchema:
    schema = parse_schema("PROTOBUF", text, refs or {})
    assert isinstance(schema, ProtobufSchema)
    return schema


MONEY_V1 = 'syntax = "proto3";\npackage common;\nmessage Money { string currency = 1; int64 units = 2; }\n'
MONEY_V2_ADDED = ('syntax = "proto3";\npackage common;\n'
                  'message Money { string currency = 1; int64 units = 2; int32 nanos = 3; }\n')
MONEY_V2_BROKEN = 'syntax = "proto3";\npackage common;\nmessage Money { string currency = 1; string units = 2; }\n'
USES_MONEY = m3("common.Money price = 1;", 'import "common/money.proto";')


@dataclass
class Case:
    """Versions oldest first (each ``text`` or ``(text, references)``); the last is the new
    schema. ``expect``: one letter per mode in MODES order (NONE, BACKWARD, BACKWARD_TRANSITIVE,
    FORWARD, FORWARD_TRANSITIVE, FULL, FULL_TRANSITIVE); y = compatible, n = refused."""

    name: str
    versions: list[str | tuple[str, dict[str, str]]]
    expect: str
    refs: dict[str, str] = field(default_factory=dict)


ALL = "yyyyyyy"
NONE_ONLY = "ynnnnnn"
BACKWARD_ONLY = "yyynnnn"  # new readers read old data; old readers break on new data
FORWARD_ONLY = "ynnyynn"

CASES = [
    Case("identical", [m3("int32 a = 1;"), m3("int32 a = 1;")], ALL),
    Case("whitespace and comments only", [m3("int32 a = 1;"), m3("  // the a\n  int32   a=1 ;")], ALL),
    Case("add a field", [m3("int32 a = 1;"), m3("int32 a = 1; string b = 2;")], ALL),
    Case("remove a field", [m3("int32 a = 1; string b = 2;"), m3("int32 a = 1;")], ALL),
    Case("remove a field, reserving it", [m3("int32 a = 1; string b = 2;"),
                                          m3('int32 a = 1; reserved 2; reserved "b";')], ALL),
    Case("rename a field (same number: wire compatible)", [m3("int32 a = 1;"), m3("int32 renamed = 1;")], ALL),
    Case("change a field's number (a removal plus an addition)", [m3("int32 a = 1;"), m3("int32 a = 2;")], ALL),
    Case("int32 -> int64", [m3("int32 a = 1;"), m3("int64 a = 1;")], ALL),
    Case("int32 -> uint64", [m3("int32 a = 1;"), m3("uint64 a = 1;")], ALL),
    Case("uint32 -> bool", [m3("uint32 a = 1;"), m3("bool a = 1;")], ALL),
    Case("int64 -> sint64 (zigzag differs)", [m3("int64 a = 1;"), m3("sint64 a = 1;")], NONE_ONLY),
    Case("sint32 -> sint64", [m3("sint32 a = 1;"), m3("sint64 a = 1;")], ALL),
    Case("fixed32 -> sfixed32", [m3("fixed32 a = 1;"), m3("sfixed32 a = 1;")], ALL),
    Case("fixed64 -> sfixed64", [m3("fixed64 a = 1;"), m3("sfixed64 a = 1;")], ALL),
    Case("fixed32 -> fixed64", [m3("fixed32 a = 1;"), m3("fixed64 a = 1;")], NONE_ONLY),
    Case("float -> double", [m3("float a = 1;"), m3("double a = 1;")], NONE_ONLY),
    Case("int32 -> fixed32", [m3("int32 a = 1;"), m3("fixed32 a = 1;")], NONE_ONLY),
    Case("string -> bytes", [m3("string a = 1;"), m3("bytes a = 1;")], ALL),
    Case("string -> int32", [m3("string a = 1;"), m3("int32 a = 1;")], NONE_ONLY),
    Case("enum -> int32", [m3("E a = 1; enum E { Z = 0; O = 1; }"), m3("int32 a = 1; enum E { Z = 0; O = 1; }")],
         ALL),
    Case("int32 -> enum", [m3("int32 a = 1;"), m3("E a = 1; enum E { Z = 0; }")], ALL),
    Case("enum -> sint32", [m3("E a = 1; enum E { Z = 0; }"), m3("sint32 a = 1; enum E { Z = 0; }")], NONE_ONLY),
    Case("message -> bytes (a kind change for the registry)",
         [m3("N a = 1; message N { int32 x = 1; }"), m3("bytes a = 1; message N { int32 x = 1; }")], NONE_ONLY),
    Case("scalar -> message", [m3("int32 a = 1; message N {}"), m3("N a = 1; message N {}")], NONE_ONLY),
    Case("message type -> another message type",
         [m3("N a = 1; message N {} message O {}"), m3("O a = 1; message N {} message O {}")], NONE_ONLY),
    Case("implicit -> repeated int32 (no written label to compare)",
         [m3("int32 a = 1;"), m3("repeated int32 a = 1;")], ALL),
    Case("optional int32 -> repeated int32", [m3("optional int32 a = 1;"), m3("repeated int32 a = 1;")], NONE_ONLY),
    Case("optional string -> repeated string", [m3("optional string a = 1;"), m3("repeated string a = 1;")], ALL),
    Case("implicit -> optional (proto3 presence only)", [m3("int32 a = 1;"), m3("optional int32 a = 1;")], ALL),
    Case("repeated message -> singular message",
         [m3("repeated N a = 1; message N {}"), m3("N a = 1; message N {}")], ALL),
    Case("proto2 optional -> required int32", [m2("optional int32 a = 1;"), m2("required int32 a = 1;")],
         NONE_ONLY),
    Case("proto2 add a required field", [m2("optional int32 a = 1;"),
                                         m2("optional int32 a = 1; required string b = 2;")], NONE_ONLY),
    Case("proto2 remove a required field", [m2("optional int32 a = 1; required string b = 2;"),
                                            m2("optional int32 a = 1;")], NONE_ONLY),
    Case("proto2 add an optional field", [m2("optional int32 a = 1;"),
                                          m2("optional int32 a = 1; optional string b = 2 [default = \"x\"];")], ALL),
    Case("proto2 required -> optional string", [m2("required string a = 1;"), m2("optional string a = 1;")], ALL),
    Case("proto2 add a group", [m2("optional int32 a = 1;"),
                                m2("optional int32 a = 1; optional group G = 2 { optional int32 x = 3; }")], ALL),
    Case("enum: add a value", [m3("E a = 1; enum E { Z = 0; }"), m3("E a = 1; enum E { Z = 0; O = 1; }")], ALL),
    Case("enum: remove a value", [m3("E a = 1; enum E { Z = 0; O = 1; }"), m3("E a = 1; enum E { Z = 0; }")], ALL),
    Case("enum: rename a value",
         [m3("E a = 1; enum E { Z = 0; O = 1; }"), m3("E a = 1; enum E { Z = 0; ONE = 1; }")], ALL),
    Case("top-level enum added", [m3("int32 a = 1;"), m3("int32 a = 1;") + "enum E { Z = 0; }\n"], ALL),
    Case("top-level enum removed", [m3("int32 a = 1;") + "enum E { Z = 0; }\n", m3("int32 a = 1;")], ALL),
    Case("message added", [m3("int32 a = 1;"), m3("int32 a = 1;") + "message N { int32 x = 1; }\n"], BACKWARD_ONLY),
    Case("message removed", [m3("int32 a = 1;") + "message N { int32 x = 1; }\n", m3("int32 a = 1;")], FORWARD_ONLY),
    Case("message renamed", [m3("int32 a = 1;"), m3("int32 a = 1;").replace("message M", "message Renamed")],
         NONE_ONLY),
    Case("messages reordered", [m3("int32 a = 1;") + "message N { int32 x = 1; }\n",
                                P3 + "message N { int32 x = 1; }\nmessage M { int32 a = 1; }\n"], ALL),
    Case("package changed", [m3("int32 a = 1;"), m3("int32 a = 1;").replace("package t;", "package u;")],
         NONE_ONLY),
    Case("oneof: add a new field to it", [m3("oneof o { int32 a = 1; }"), m3("oneof o { int32 a = 1; string b = 2; }")],
         BACKWARD_ONLY),
    Case("oneof: remove a field from it",
         [m3("oneof o { int32 a = 1; string b = 2; }"), m3("oneof o { int32 a = 1; }")], FORWARD_ONLY),
    Case("oneof: move one field into a new oneof", [m3("int32 a = 1; string b = 2;"),
                                                    m3("oneof o { int32 a = 1; } string b = 2;")], ALL),
    Case("oneof: move two fields into a new oneof", [m3("int32 a = 1; string b = 2;"),
                                                     m3("oneof o { int32 a = 1; string b = 2; }")], FORWARD_ONLY),
    Case("oneof: move a field into an existing oneof", [m3("int32 a = 1; oneof o { string b = 2; }"),
                                                        m3("oneof o { int32 a = 1; string b = 2; }")], FORWARD_ONLY),
    Case("oneof: renamed",
         [m3("oneof o { int32 a = 1; string b = 2; }"), m3("oneof p { int32 a = 1; string b = 2; }")], ALL),
    Case("oneof: incompatible type change inside", [m3("oneof o { int32 a = 1; }"), m3("oneof o { string a = 1; }")],
         NONE_ONLY),
    Case("map: added", [m3("int32 a = 1;"), m3("int32 a = 1; map<string, int32> m = 2;")], ALL),
    Case("map: value int32 -> int64", [m3("map<string, int32> m = 1;"), m3("map<string, int64> m = 1;")], ALL),
    Case("map: value int32 -> string", [m3("map<string, int32> m = 1;"), m3("map<string, string> m = 1;")],
         NONE_ONLY),
    Case("map: key string -> int32", [m3("map<string, int32> m = 1;"), m3("map<int32, int32> m = 1;")], NONE_ONLY),
    Case("map -> repeated string", [m3("map<string, string> m = 1;"), m3("repeated string m = 1;")], NONE_ONLY),
    Case("nested: field added", [m3("N n = 1; message N { int32 x = 1; }"),
                                 m3("N n = 1; message N { int32 x = 1; string y = 2; }")], ALL),
    Case("nested: field type broken", [m3("N n = 1; message N { int32 x = 1; }"),
                                       m3("N n = 1; message N { string x = 1; }")], NONE_ONLY),
    Case("nested: unused nested message removed", [m3("int32 a = 1; message N { int32 x = 1; }"), m3("int32 a = 1;")],
         FORWARD_ONLY),
    Case("syntax proto2 -> proto3", [m2("optional int32 a = 1; optional string b = 2;"),
                                     m3("int32 a = 1; string b = 2;")], ALL),
    Case("syntax proto3 -> proto2", [m3("int32 a = 1;"), m2("optional int32 a = 1;")], ALL),
    Case("options and json_name added", [m3("int32 a = 1;"),
                                         m3('option deprecated = true; '
                                            'int32 a = 1 [json_name = "A", deprecated = true];',
                                            'option java_package = "x.y";')], ALL),
    Case("service added", [m3("int32 a = 1;"), m3("int32 a = 1;") + "service S { rpc Get (M) returns (M); }\n"], ALL),
    Case("editions: field added", ['edition = "2023";\npackage t;\nmessage M { int32 a = 1; }\n',
                                   'edition = "2023";\npackage t;\nmessage M { int32 a = 1; string b = 2; }\n'], ALL),
    Case("well-known: Timestamp -> Duration",
         [m3("google.protobuf.Timestamp t = 1;", 'import "google/protobuf/timestamp.proto";'),
          m3("google.protobuf.Duration t = 1;", 'import "google/protobuf/duration.proto";')], NONE_ONLY),
    Case("well-known: int64 -> Int64Value", [m3("int64 a = 1;"),
                                             m3("google.protobuf.Int64Value a = 1;",
                                                'import "google/protobuf/wrappers.proto";')], NONE_ONLY),
    Case("reference: compatible new version of the referenced file",
         [(USES_MONEY, {"common/money.proto": MONEY_V1}), (USES_MONEY, {"common/money.proto": MONEY_V2_ADDED})], ALL),
    Case("reference: incompatible new version of the referenced file",
         [(USES_MONEY, {"common/money.proto": MONEY_V1}), (USES_MONEY, {"common/money.proto": MONEY_V2_BROKEN})],
         NONE_ONLY),
    Case("reference -> local message of the same name",
         [(USES_MONEY, {"common/money.proto": MONEY_V1}),
          m3("Money price = 1; message Money { string currency = 1; int64 units = 2; }")], NONE_ONLY),
    # Three versions, each step fine, but not against the first: the transitive modes refuse.
    Case("3 versions: field number reused with another scalar kind",
         [m3("int32 a = 1; string b = 2;"), m3("string b = 2;"), m3("string a = 1; string b = 2;")], "yynynyn"),
    Case("3 versions: map value reused with another kind",
         [m3("map<string, int32> m = 3;"), m3("int32 a = 1;"), m3("int32 a = 1; map<string, string> m = 3;")],
         "yynynyn"),
    Case("3 versions: fixed32 removed then float at its number",
         [m3("fixed32 f = 1; int32 a = 2;"), m3("int32 a = 2;"), m3("float f = 1; int32 a = 2;")], "yynynyn"),
]


def version(item: str | tuple[str, dict[str, str]]) -> ProtobufSchema:
    text, refs = item if isinstance(item, tuple) else (item, {})
    return parse(text, refs)


def test_the_table_is_large() -> None:
    assert len(CASES) >= 50
    assert len({case.name for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_compatibility_table(case: Case) -> None:
    schemas = [version(item) for item in case.versions]
    earlier = list(enumerate(schemas[:-1], start=1))
    got = "".join("n" if compatibility_errors(mode, schemas[-1], earlier) else "y" for mode in MODES)
    assert got == case.expect, dict(zip(MODES, got, strict=True))


def test_incompatibility_messages_name_the_rule_and_place() -> None:
    old, new = parse(m3("int32 a = 1;")), parse(m3("string a = 1;"))
    errors = new.read_errors(old)
    assert [(e.kind, e.path) for e in errors] == [("FIELD_SCALAR_KIND_CHANGED", "#/M/1")]
    messages = compatibility_errors("BACKWARD", new, [(1, old)])
    assert "FIELD_SCALAR_KIND_CHANGED" in messages[0] and "{oldSchemaVersion: 1}" in messages


def test_compatible_differences_are_still_reported_as_differences() -> None:
    old = parse(m3("int32 a = 1; E e = 2; enum E { Z = 0; }"))
    new = parse(m3("int64 b = 1; E e = 2; string c = 3; enum E { Z = 0; O = 1; }"))
    kinds = {kind for kind, _ in new.differences(old)}
    assert kinds == {"FIELD_NAME_CHANGED", "FIELD_ADDED", "ENUM_CONST_ADDED"}
    assert new.read_errors(old) == []


# --- against the real protobuf runtime --------------------------------------------------------------

def _pool_class(schema: ProtobufSchema, name: str):  # type: ignore[no-untyped-def]
    from google.protobuf import descriptor_pool, message_factory
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(path: str) -> None:
        if path in added:
            return
        added.add(path)
        for imported, _ in schema.dependencies[path].imports:
            add(imported)
        dependency = ProtobufSchema.__new__(ProtobufSchema)
        dependency.proto = schema.dependencies[path]
        pool.AddSerializedFile(dependency.file_descriptor_proto(path))

    for imported, _ in schema.proto.imports:
        add(imported)
    pool.AddSerializedFile(schema.file_descriptor_proto(f"{name}.proto"))
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(schema.message_names[0]))


def _fill(message, depth: int = 0) -> None:  # type: ignore[no-untyped-def]
    from google.protobuf.descriptor import FieldDescriptor as FD
    samples = {FD.CPPTYPE_INT32: 1, FD.CPPTYPE_INT64: 1, FD.CPPTYPE_UINT32: 1, FD.CPPTYPE_UINT64: 1,
               FD.CPPTYPE_BOOL: True, FD.CPPTYPE_FLOAT: 1.5, FD.CPPTYPE_DOUBLE: 1.5}
    oneofs_set: set[str] = set()
    for fd in message.DESCRIPTOR.fields:
        if fd.containing_oneof is not None:
            if fd.containing_oneof.name in oneofs_set:
                continue
            oneofs_set.add(fd.containing_oneof.name)
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            key_fd, value_fd = fd.message_type.fields_by_name["key"], fd.message_type.fields_by_name["value"]
            key = "k" if key_fd.cpp_type == FD.CPPTYPE_STRING else samples[key_fd.cpp_type]
            if value_fd.message_type is not None:
                getattr(message, fd.name)[key].SetInParent()
            elif value_fd.cpp_type == FD.CPPTYPE_STRING:
                getattr(message, fd.name)[key] = "v" if value_fd.type == FD.TYPE_STRING else b"v"
            else:
                enum = value_fd.cpp_type == FD.CPPTYPE_ENUM
                getattr(message, fd.name)[key] = 1 if enum else samples[value_fd.cpp_type]
            continue
        if fd.cpp_type == FD.CPPTYPE_MESSAGE:
            target = getattr(message, fd.name)
            target = target.add() if fd.is_repeated else target
            if depth < 2:
                _fill(target, depth + 1)
            target.SetInParent()
            continue
        if fd.cpp_type == FD.CPPTYPE_STRING:
            value = "s" if fd.type == FD.TYPE_STRING else b"s"
        elif fd.cpp_type == FD.CPPTYPE_ENUM:
            value = fd.enum_type.values[-1].number
        else:
            value = samples[fd.cpp_type]
        if fd.is_repeated:
            getattr(message, fd.name).append(value)
        else:
            setattr(message, fd.name, value)


def _readable_pairs() -> list[tuple[str, ProtobufSchema, ProtobufSchema]]:
    pairs = []
    for case in CASES:
        schemas = [version(item) for item in case.versions]
        for mode_letter, writer, reader in ((case.expect[1], schemas[-2], schemas[-1]),
                                            (case.expect[3], schemas[-1], schemas[-2])):
            if mode_letter == "y" and not reader.read_errors(writer):
                pairs.append((case.name, writer, reader))
    return pairs


def test_table_readable_cases_decode() -> None:
    """For every pair the table calls readable, real protobuf parses the writer's bytes with the
    reader's classes, and the fields both have (same number and same type) keep their values."""
    pytest.importorskip("google.protobuf")
    checked = 0
    for name, writer, reader in _readable_pairs():
        if writer.message_names[0] != reader.message_names[0]:
            continue  # reordered messages: serializers' message indexes point at the writer's
        written = _pool_class(writer, "writer")()
        _fill(written)
        data = written.SerializeToString()
        read = _pool_class(reader, "reader").FromString(data)  # raises if it cannot
        for fd in read.DESCRIPTOR.fields:
            origin = written.DESCRIPTOR.fields_by_number.get(fd.number)
            if origin is None or fd.message_type is not None:
                continue
            if origin.type != fd.type or origin.is_repeated != fd.is_repeated:
                continue
            assert getattr(read, fd.name) == getattr(written, origin.name), (name, fd.name)
        checked += 1
    assert checked >= 40


# --- parse errors -------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, words", [
    (P3 + "message M { int32 a = 1 }", "line"),
    (P3 + "message M { int32 a = 1; string b = 1; }", "both have number 1"),
    (P3 + "message M { int32 a = 1; string a = 2; }", "used twice"),
    (P3 + "message M { reserved 2; int32 a = 2; }", "reserved number"),
    (P3 + "message M { reserved 1 to 5; int32 a = 3; }", "reserved number"),
    (P3 + 'message M { reserved "a"; int32 a = 2; }', "reserved name"),
    (P3 + "message M { int32 a = 0; }", "outside"),
    (P3 + "message M { int32 a = 536870912; }", "outside"),
    (P3 + "message M { int32 a = 19500; }", "19000..19999"),
    (P3 + "message M { Unknown a = 1; }", "unknown type"),
    (P3 + "message M { google.protobuf.Timestamp a = 1; }", "unknown type"),  # not imported
    (P3 + "message M { map<double, int32> m = 1; }", "mismatched input"),
    (P3 + "message M { map<bytes, int32> m = 1; }", "mismatched input"),
    (P3 + "message M { map<E, int32> m = 1; enum E { Z = 0; } }", "mismatched input"),
    (P3 + "enum E { A = 1; }", "must be 0"),
    (P3 + "enum E { A = 0; B = 0; }", "allow_alias"),
    (P3 + "enum E { A = 0; reserved 1; B = 1; }", "reserved"),
    (P3 + "message M { required int32 a = 1; }", "no required"),
    (P2 + "message M { int32 a = 1; }", "needs a label"),
    (P3 + 'import "missing.proto";\nmessage M { int32 a = 1; }', "neither a reference"),
    (P3 + "message M { int32 a = 1; }\nmessage M { int32 b = 1; }", "already defined"),
    ('syntax = "proto4";\nmessage M { int32 a = 1; }', "unknown syntax"),
    (P3 + "message M { int32 a = 1; } service S { rpc Get (Missing) returns (M); }", "not a known message"),
    (P3 + "message M { int32 a = 1 [default = 3]; }", "default"),
    ("this is not protobuf", "invalid Protobuf schema"),
    (P3 + "message { }", "invalid Protobuf schema"),
])
def test_invalid_schemas_are_refused(text: str, words: str) -> None:
    with pytest.raises(SchemaError, match="invalid Protobuf schema") as error:
        parse(text)
    assert words in str(error.value)


def test_proto2_enum_need_not_start_at_zero_and_aliases_are_allowed() -> None:
    parse(P2 + "enum E { option allow_alias = true; A = 1; B = 1; }")


# --- canonical and normalized text ----------------------------------------------------------------

MESSY = """
// leading comment
syntax="proto3"; package acme.v1;
import "google/protobuf/timestamp.proto";  import "common/money.proto";
option java_package="com.acme"; option go_package = "acme/v1";
message Order { string id=1; google.protobuf.Timestamp at = 2; common.Money total = 3;
  map<string,Line> lines=4; oneof pay { string card = 6; int64 cash = 5; }
  reserved 9, 7 to 8; reserved "old";
  message Line { int32 qty = 1; }
  enum Status { UNKNOWN = 0; OK = 1; } Status status = 10 [deprecated=true, json_name="st"]; }
"""
REFS = {"common/money.proto": MONEY_V1}


def test_canonical_text_is_stable_and_parses_to_itself() -> None:
    schema = parse(MESSY, REFS)
    canonical = schema.canonical()
    assert canonical.startswith('syntax = "proto3";\npackage acme.v1;\n\nimport "google/protobuf/timestamp.proto";')
    assert "// leading comment" not in canonical
    again = parse(canonical, REFS)
    assert again.canonical() == canonical
    assert again == schema


def test_canonical_keeps_names_as_written_and_normalized_qualifies_them() -> None:
    schema = parse(MESSY, REFS)
    assert "  common.Money total = 3;" in schema.canonical()
    assert "  .common.Money total = 3;" in schema.normalized()
    assert "  map<string, .acme.v1.Order.Line> lines = 4;" in schema.normalized()


def test_normalized_forms_of_equivalent_schemas_are_equal() -> None:
    shuffled = """
syntax = "proto3";
package acme.v1;
import "common/money.proto";
import "google/protobuf/timestamp.proto";
option go_package = "acme/v1";
option java_package = "com.acme";
message Order {
  enum Status { OK = 1; UNKNOWN = 0; }
  message Line { int32 qty = 1; }
  reserved "old";
  reserved 7 to 8, 9;
  .acme.v1.Order.Status status = 10 [json_name = "st", deprecated = true];
  oneof pay { int64 cash = 5; string card = 6; }
  map<string, acme.v1.Order.Line> lines = 4;
  .common.Money total = 3;
  google.protobuf.Timestamp at = 2;
  string id = 1;
}
"""
    # Proto3's first enum value must be 0, so the shuffled enum is written with UNKNOWN first.
    shuffled = shuffled.replace("enum Status { OK = 1; UNKNOWN = 0; }", "enum Status { UNKNOWN = 0; OK = 1; }")
    a, b = parse(MESSY, REFS), parse(shuffled, REFS)
    assert a.canonical() != b.canonical()
    assert a.normalized() == b.normalized()


def test_normalizing_keeps_message_order() -> None:
    a = parse(P3 + "message A {}\nmessage B {}\n")
    b = parse(P3 + "message B {}\nmessage A {}\n")
    assert a.normalized() != b.normalized()
    assert a.message_names == ["t.A", "t.B"]


# --- references, well-known files, FileDescriptorProto ---------------------------------------------

def test_references_are_imports_and_nested_references_resolve() -> None:
    refs = {
        "common/money.proto": 'syntax = "proto3";\npackage common;\nimport "common/currency.proto";\n'
                              "message Money { Currency currency = 1; int64 units = 2; }\n",
        "common/currency.proto": 'syntax = "proto3";\npackage common;\nenum Currency { EUR = 0; USD = 1; }\n',
    }
    schema = parse(USES_MONEY, refs)
    assert set(schema.dependencies) == {"common/money.proto", "common/currency.proto"}
    # A type of a file imported by an import is not visible without a public import.
    with pytest.raises(SchemaError, match="unknown type"):
        parse(m3("common.Currency c = 1;", 'import "common/money.proto";'), refs)
    refs["common/money.proto"] = refs["common/money.proto"].replace("import ", "import public ")
    parse(m3("common.Currency c = 1;", 'import "common/money.proto";'), refs)


def test_import_cycles_are_refused() -> None:
    refs = {"a.proto": 'syntax = "proto3";\nimport "b.proto";\n', "b.proto": 'syntax = "proto3";\nimport "a.proto";\n'}
    with pytest.raises(SchemaError, match="cycle"):
        parse(m3("int32 a = 1;", 'import "a.proto";'), refs)


@pytest.mark.parametrize("path", sorted(KNOWN_FILES))
def test_well_known_imports_resolve_without_references(path: str) -> None:
    parse(P3 + f'import "{path}";\nmessage M {{ int32 a = 1; }}\n')


def _real_descriptor(path: str):  # type: ignore[no-untyped-def]
    import importlib
    module = {"confluent/meta.proto": "confluent_kafka.schema_registry.confluent.meta_pb2",
              "confluent/type/decimal.proto": "confluent_kafka.schema_registry.confluent.type.decimal_pb2"}.get(
        path, path.replace("/", ".").removesuffix(".proto") + "_pb2")
    try:
        return importlib.import_module(module).DESCRIPTOR
    except ImportError:
        return None


@pytest.mark.parametrize("path", sorted(p for p in KNOWN_FILES if p != "google/protobuf/descriptor.proto"))
def test_well_known_definitions_match_the_protobuf_packages(path: str) -> None:
    real = _real_descriptor(path)
    if real is None:
        pytest.skip(f"no compiled {path} installed")
    ours = parse(KNOWN_FILES[path]).proto

    def shape(messages, enums, prefix: str) -> dict[str, object]:  # type: ignore[no-untyped-def]
        out: dict[str, object] = {}
        for enum in enums:
            out[prefix + enum.name] = sorted((v.name, v.number) for v in enum.values)
        for message in messages:
            out[prefix + message.name] = sorted((f.name, f.number) for f in message.fields)
            out.update(shape(message.messages if hasattr(message, "messages") else
                             [m for m in message.nested_types if not m.GetOptions().map_entry],
                             message.enums if hasattr(message, "messages") else message.enum_types,
                             prefix + message.name + "."))
        return out

    assert ours.package == real.package
    assert shape(ours.messages, ours.enums, "") == shape(
        list(real.message_types_by_name.values()), list(real.enum_types_by_name.values()), "")


def test_descriptor_option_field_numbers_match_protobuf() -> None:
    from google.protobuf import descriptor_pb2
    from riverlog.schema_registry.formats import protobuf_wire as wire
    d = descriptor_pb2
    for layout, real in ((wire.FILE_OPTIONS, d.FileOptions), (wire.MESSAGE_OPTIONS, d.MessageOptions),
                         (wire.FIELD_OPTIONS, d.FieldOptions), (wire.ENUM_OPTIONS, d.EnumOptions),
                         (wire.ENUM_VALUE_OPTIONS, d.EnumValueOptions), (wire.SERVICE_OPTIONS, d.ServiceOptions),
                         (wire.METHOD_OPTIONS, d.MethodOptions), (wire.FILE, d.FileDescriptorProto),
                         (wire.MESSAGE, d.DescriptorProto), (wire.FIELD, d.FieldDescriptorProto),
                         (wire.ENUM, d.EnumDescriptorProto), (wire.METHOD, d.MethodDescriptorProto)):
        for number, (name, _, _) in layout.items():
            assert real.DESCRIPTOR.fields_by_name[name].number == number, (real.__name__, name)


def test_what_confluent_kafka_sends_parses() -> None:
    """confluent-kafka's ProtobufSerializer registers base64 FileDescriptorProtos: for the schema
    (imports of well-known files sent without references) and for each imported file."""
    from confluent_kafka.schema_registry.common.protobuf import _schema_to_str
    from confluent_kafka.schema_registry.confluent import meta_pb2
    from google.protobuf import descriptor_pb2, struct_pb2, type_pb2
    for module in (meta_pb2, struct_pb2, type_pb2, descriptor_pb2):
        schema = parse(_schema_to_str(module.DESCRIPTOR))
        assert schema.canonical() == parse(schema.canonical()).canonical()
    # A user's schema importing Timestamp and a referenced file, compiled by protobuf itself.
    money = parse(MONEY_V1)
    user = parse(m3("google.protobuf.Timestamp at = 1; common.Money total = 2; map<string, int32> m = 3;",
                    'import "google/protobuf/timestamp.proto";\nimport "common/money.proto";'),
                 {"common/money.proto": MONEY_V1})
    from google.protobuf import descriptor_pool, timestamp_pb2
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.AddSerializedFile(money.file_descriptor_proto("common/money.proto"))
    pool.AddSerializedFile(user.file_descriptor_proto("user.proto"))
    sent = _schema_to_str(pool.FindFileByName("user.proto"))
    references = {"common/money.proto": _schema_to_str(pool.FindFileByName("common/money.proto"))}
    registered = parse(sent, references)
    assert registered.normalized() == user.normalized()
    assert "map<string, int32> m = 3;" in registered.canonical()
    assert registered.read_errors(user) == [] and user.read_errors(registered) == []


def test_serialized_form_round_trips_through_protobuf() -> None:
    from google.protobuf import descriptor_pb2
    schema = parse(MESSY, REFS)
    proto = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema.serialized()))
    assert proto.package == "acme.v1"
    assert [f.name for f in proto.message_type[0].field] == ["id", "at", "total", "lines", "card", "cash", "status"]
    assert parse(schema.serialized(), REFS).normalized() == schema.normalized()


def test_proto2_features_round_trip_through_the_descriptor() -> None:
    text = P2 + """
message M {
  optional int32 a = 1 [default = 7, packed = false];
  required string b = 2;
  repeated int64 c = 3 [packed = true];
  optional group G = 4 { optional int32 x = 5; }
  extensions 100 to 199;
  reserved 10 to 20;
}
extend M { optional string ext = 100; }
enum E { A = 1; B = 2; reserved 5 to 6; }
service S { rpc Get (stream M) returns (M) { option deprecated = true; } }
"""
    schema = parse(text)
    again = parse(schema.serialized())
    assert again.normalized() == schema.normalized()
