"""PROTOBUF schemas as ``google.protobuf.FileDescriptorProto`` bytes, both ways.

confluent-kafka's ``ProtobufSerializer`` registers schemas (and each imported file) as base64 of
the file's serialized ``FileDescriptorProto``, and its deserializers ask for ``format=serialized``
to get that form back. The ``protobuf`` package is not a runtime dependency of the broker, so
this is a small codec of its own for the descriptor messages, covering what a ``.proto`` file
declares: messages, fields, oneofs, maps, groups, enums, reserved ranges and names, extension
ranges, extensions, services and the standard options. Custom options (extensions of the
``*Options`` messages) arrive as fields this codec does not know and are dropped; see
docs/schema-registry.md.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from .base import SchemaError

# A descriptor message's layout: field number -> (name, type, repeated), where type is "string",
# "bytes", "int" (int32/int64 varint), "bool", "enum" or another layout (a message).
Layout = dict[int, tuple[str, Any, bool]]


def _options_layout(fields: dict[int, tuple[str, str]]) -> Layout:
    return {number: (name, kind, False) for number, (name, kind) in fields.items()}


# Field numbers from google/protobuf/descriptor.proto (tests check them against the protobuf
# package's own descriptors).
FILE_OPTIONS = _options_layout({
    1: ("java_package", "string"), 8: ("java_outer_classname", "string"), 10: ("java_multiple_files", "bool"),
    20: ("java_generate_equals_and_hash", "bool"), 27: ("java_string_check_utf8", "bool"),
    9: ("optimize_for", "enum"), 11: ("go_package", "string"), 16: ("cc_generic_services", "bool"),
    17: ("java_generic_services", "bool"), 18: ("py_generic_services", "bool"), 23: ("deprecated", "bool"),
    31: ("cc_enable_arenas", "bool"), 36: ("objc_class_prefix", "string"), 37: ("csharp_namespace", "string"),
    39: ("swift_prefix", "string"), 40: ("php_class_prefix", "string"), 41: ("php_namespace", "string"),
    44: ("php_metadata_namespace", "string"), 45: ("ruby_package", "string"),
})
MESSAGE_OPTIONS = _options_layout({
    1: ("message_set_wire_format", "bool"), 2: ("no_standard_descriptor_accessor", "bool"),
    3: ("deprecated", "bool"), 7: ("map_entry", "bool"), 11: ("deprecated_legacy_json_field_conflicts", "bool"),
})
FIELD_OPTIONS = _options_layout({
    1: ("ctype", "enum"), 2: ("packed", "bool"), 6: ("jstype", "enum"), 5: ("lazy", "bool"),
    15: ("unverified_lazy", "bool"), 3: ("deprecated", "bool"), 10: ("weak", "bool"), 16: ("debug_redact", "bool"),
})
ONEOF_OPTIONS: Layout = {}
ENUM_OPTIONS = _options_layout({
    2: ("allow_alias", "bool"), 3: ("deprecated", "bool"), 6: ("deprecated_legacy_json_field_conflicts", "bool"),
})
ENUM_VALUE_OPTIONS = _options_layout({1: ("deprecated", "bool"), 3: ("debug_redact", "bool")})
SERVICE_OPTIONS = _options_layout({33: ("deprecated", "bool")})
METHOD_OPTIONS = _options_layout({33: ("deprecated", "bool"), 34: ("idempotency_level", "enum")})

# The names of the standard options' enum values.
OPTION_ENUMS: dict[str, dict[int, str]] = {
    "optimize_for": {1: "SPEED", 2: "CODE_SIZE", 3: "LITE_RUNTIME"},
    "ctype": {0: "STRING", 1: "CORD", 2: "STRING_PIECE"},
    "jstype": {0: "JS_NORMAL", 1: "JS_STRING", 2: "JS_NUMBER"},
    "idempotency_level": {0: "IDEMPOTENCY_UNKNOWN", 1: "NO_SIDE_EFFECTS", 2: "IDEMPOTENT"},
}

FIELD: Layout = {
    1: ("name", "string", False), 2: ("extendee", "string", False), 3: ("number", "int", False),
    4: ("label", "enum", False), 5: ("type", "enum", False), 6: ("type_name", "string", False),
    7: ("default_value", "string", False), 8: ("options", FIELD_OPTIONS, False),
    9: ("oneof_index", "int", False), 10: ("json_name", "string", False), 17: ("proto3_optional", "bool", False),
}
RANGE: Layout = {1: ("start", "int", False), 2: ("end", "int", False)}
EXTENSION_RANGE: Layout = {**RANGE, 3: ("options", {}, False)}
ONEOF: Layout = {1: ("name", "string", False), 2: ("options", ONEOF_OPTIONS, False)}
ENUM_VALUE: Layout = {1: ("name", "string", False), 2: ("number", "int", False),
                      3: ("options", ENUM_VALUE_OPTIONS, False)}
ENUM: Layout = {
    1: ("name", "string", False), 2: ("value", ENUM_VALUE, True), 3: ("options", ENUM_OPTIONS, False),
    4: ("reserved_range", RANGE, True), 5: ("reserved_name", "string", True),
}
MESSAGE: Layout = {
    1: ("name", "string", False), 2: ("field", FIELD, True), 4: ("enum_type", ENUM, True),
    5: ("extension_range", EXTENSION_RANGE, True), 6: ("extension", FIELD, True),
    7: ("options", MESSAGE_OPTIONS, False), 8: ("oneof_decl", ONEOF, True), 9: ("reserved_range", RANGE, True),
    10: ("reserved_name", "string", True),
}
MESSAGE[3] = ("nested_type", MESSAGE, True)
METHOD: Layout = {
    1: ("name", "string", False), 2: ("input_type", "string", False), 3: ("output_type", "string", False),
    4: ("options", METHOD_OPTIONS, False), 5: ("client_streaming", "bool", False),
    6: ("server_streaming", "bool", False),
}
SERVICE: Layout = {1: ("name", "string", False), 2: ("method", METHOD, True), 3: ("options", SERVICE_OPTIONS, False)}
FILE: Layout = {
    1: ("name", "string", False), 2: ("package", "string", False), 3: ("dependency", "string", True),
    4: ("message_type", MESSAGE, True), 5: ("enum_type", ENUM, True), 6: ("service", SERVICE, True),
    7: ("extension", FIELD, True), 8: ("options", FILE_OPTIONS, False), 10: ("public_dependency", "int", True),
    11: ("weak_dependency", "int", True), 12: ("syntax", "string", False), 14: ("edition", "enum", False),
}

EDITIONS = {998: "proto2", 999: "proto3", 1000: "2023", 1001: "2024"}


# --- the wire format --------------------------------------------------------------------------

def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, pos


def decode(data: bytes, layout: Layout) -> dict[str, Any]:
    """A message's known fields as a dict (repeated fields as lists); unknown ones skipped."""
    out: dict[str, Any] = {}
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire_type = key >> 3, key & 7
        value: Any
        if wire_type == 0:
            value, pos = _varint(data, pos)
            if value >= 1 << 63:
                value -= 1 << 64  # negative int32/int64
        elif wire_type == 2:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise ValueError("truncated field")
            value, pos = data[pos:pos + length], pos + length
        elif wire_type == 1:
            value, pos = data[pos:pos + 8], pos + 8
        elif wire_type == 5:
            value, pos = data[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire_type}")
        if number not in layout:
            continue
        name, kind, repeated = layout[number]
        if isinstance(kind, dict):
            value = decode(value, kind)
        elif kind == "string":
            value = value.decode("utf-8")
        elif kind == "bool":
            value = bool(value)
        elif kind in ("int", "enum") and isinstance(value, bytes):  # packed repeated ints
            items, inner = [], 0
            while inner < len(value):
                item, inner = _varint(value, inner)
                items.append(item)
            out.setdefault(name, []).extend(items)
            continue
        if repeated:
            out.setdefault(name, []).append(value)
        else:
            out[name] = value
    return out


def _put_varint(out: bytearray, value: int) -> None:
    if value < 0:
        value += 1 << 64
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return


def encode(message: dict[str, Any], layout: Layout) -> bytes:
    """The inverse of :func:`decode`: fields in number order, as protoc writes them."""
    out = bytearray()
    for number in sorted(layout):
        name, kind, repeated = layout[number]
        if name not in message:
            continue
        values = message[name] if repeated else [message[name]]
        for value in values:
            if isinstance(kind, dict) or kind in ("string", "bytes"):
                if isinstance(kind, dict):
                    payload = encode(value, kind)
                else:
                    payload = value.encode("utf-8") if isinstance(value, str) else value
                _put_varint(out, number << 3 | 2)
                _put_varint(out, len(payload))
                out += payload
            else:
                _put_varint(out, number << 3)
                _put_varint(out, int(value))
    return bytes(out)


# --- FileDescriptorProto -> the model ------------------------------------------------------------

_TYPES = {1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64", 7: "fixed32", 8: "bool",
          9: "string", 12: "bytes", 13: "uint32", 15: "sfixed32", 16: "sfixed64", 17: "sint32", 18: "sint64"}
_TYPE_NUMBERS = {name: number for number, name in _TYPES.items()}
_GROUP, _MESSAGE, _ENUM = 10, 11, 14
_LABELS = {1: "optional", 2: "required", 3: "repeated"}
_LABEL_NUMBERS = {name: number for number, name in _LABELS.items()}


def _model_options(options: dict[str, Any] | None) -> list[Any]:
    from .protobuf_model import Ident, Option
    result = []
    for name, value in (options or {}).items():
        if name in OPTION_ENUMS:
            value = Ident(OPTION_ENUMS[name].get(value, str(value)))
        result.append(Option(name, value))
    return result


def _json_name(name: str) -> str:
    # protoc's default JSON name: underscores dropped, the letter after one upper-cased.
    parts = name.split("_")
    return parts[0] + "".join(part[:1].upper() + part[1:] for part in parts[1:])


def _model_field(data: dict[str, Any], syntax: str,
                 oneofs: list[str], nested: dict[str, dict[str, Any]]) -> Any:
    from .protobuf_model import Field, Option
    type_number = data.get("type", 0)
    type_name = data.get("type_name", "")
    label = _LABELS.get(data.get("label", 1))
    options = _model_options(data.get("options"))
    if "default_value" in data:
        default: Any = data["default_value"]
        if type_number == _TYPE_NUMBERS["bool"]:
            default = default == "true"
        elif type_number in _TYPES and _TYPES[type_number] not in ("string", "bytes"):
            default = float(default) if any(c in default for c in ".eEn") else int(default)
        elif type_number == _ENUM:
            from .protobuf_model import Ident
            default = Ident(default)
        options.insert(0, Option("default", default))
    if "json_name" in data and data["json_name"] != _json_name(data["name"]):
        options.append(Option("json_name", data["json_name"]))
    oneof = None
    if "oneof_index" in data and not data.get("proto3_optional"):
        oneof = oneofs[data["oneof_index"]]
    if syntax == "proto3" and label == "optional" and not data.get("proto3_optional"):
        label = None  # proto3's implicit presence: written without a label
    if oneof is not None or syntax == "editions" and label == "optional":
        label = None
    fld = Field(data["name"], data.get("number", 0), "", label, options, oneof)
    short = type_name.rsplit(".", 1)[-1]
    if type_number in _TYPES:
        fld.type = _TYPES[type_number]
    elif type_number == _GROUP and short in nested:
        fld.type = short
        fld.group = message_from_descriptor(nested.pop(short), syntax)
    elif short in nested and nested[short].get("options", {}).get("map_entry"):
        entry = {f["name"]: f for f in nested.pop(short).get("field", [])}
        key, value = entry.get("key", {}), entry.get("value", {})
        fld.key_type = _TYPES.get(key.get("type", 0), "string")
        fld.type = _TYPES.get(value.get("type", 0)) or value.get("type_name", "")
        fld.label = None
    else:
        fld.type = type_name
    return fld


def decode_file_descriptor(path: str, text: str) -> Any:
    """The model of a base64 FileDescriptorProto, or None when ``text`` is not one."""
    from .protobuf_model import Enum, EnumValue, Extend, Method, ProtoFile, Service
    compact = "".join(text.split())
    if not compact or len(compact) % 4:
        return None
    try:
        data = decode(base64.b64decode(compact, validate=True), FILE)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None
    if not data:
        return None
    syntax = data.get("syntax")
    edition = EDITIONS.get(data["edition"]) if syntax == "editions" and "edition" in data else None
    proto = ProtoFile(path, syntax if syntax in ("proto3", "editions") else None, edition,
                      data.get("package", ""))
    if syntax == "editions":
        proto.syntax = None
        if edition is None:
            raise SchemaError("invalid Protobuf schema: unknown edition in the file descriptor")
    public = set(data.get("public_dependency", []))
    weak = set(data.get("weak_dependency", []))
    proto.imports = [(dependency, "public" if i in public else "weak" if i in weak else "")
                     for i, dependency in enumerate(data.get("dependency", []))]
    proto.options = _model_options(data.get("options"))
    effective = proto.effective_syntax
    proto.messages = [message_from_descriptor(message, effective) for message in data.get("message_type", [])]
    proto.enums = [_enum_from_descriptor(enum, Enum, EnumValue) for enum in data.get("enum_type", [])]
    proto.extends = _extends_from_descriptor(data.get("extension", []), effective, Extend)
    for service in data.get("service", []):
        proto.services.append(Service(service["name"], [
            Method(method["name"], method.get("input_type", ""), method.get("output_type", ""),
                   method.get("client_streaming", False), method.get("server_streaming", False),
                   _model_options(method.get("options"))) for method in service.get("method", [])],
            _model_options(service.get("options"))))
    return proto


def _enum_from_descriptor(data: dict[str, Any], enum_class: Any, value_class: Any) -> Any:
    return enum_class(
        data["name"],
        [value_class(value["name"], value.get("number", 0), _model_options(value.get("options")))
         for value in data.get("value", [])],
        _model_options(data.get("options")),
        [(r.get("start", 0), r.get("end", 0)) for r in data.get("reserved_range", [])],  # inclusive already
        list(data.get("reserved_name", [])))


def _extends_from_descriptor(fields: list[dict[str, Any]], syntax: str, extend_class: Any) -> list[Any]:
    extends: dict[str, Any] = {}
    for data in fields:
        extend = extends.setdefault(data.get("extendee", ""), extend_class(data.get("extendee", "")))
        extend.fields.append(_model_field(data, syntax, [], {}))
    return list(extends.values())


def message_from_descriptor(data: dict[str, Any], syntax: str) -> Any:
    from .protobuf_model import Enum, EnumValue, Extend, Message, OneOf
    message = Message(data["name"], options=[o for o in _model_options(data.get("options"))])
    nested = {n["name"]: n for n in data.get("nested_type", [])}
    oneofs = [o["name"] for o in data.get("oneof_decl", [])]
    synthetic = {data_field["oneof_index"] for data_field in data.get("field", [])
                 if data_field.get("proto3_optional") and "oneof_index" in data_field}
    message.oneofs = [OneOf(o["name"], _model_options(o.get("options")))
                      for i, o in enumerate(data.get("oneof_decl", [])) if i not in synthetic]
    message.fields = [_model_field(f, syntax, oneofs, nested) for f in data.get("field", [])]
    # Map entries and groups were taken out of ``nested`` by their fields.
    message.messages = [message_from_descriptor(n, syntax) for n in nested.values()]
    message.enums = [_enum_from_descriptor(e, Enum, EnumValue) for e in data.get("enum_type", [])]
    message.reserved = [(r.get("start", 0), r.get("end", 1) - 1) for r in data.get("reserved_range", [])]
    message.reserved_names = list(data.get("reserved_name", []))
    message.extension_ranges = [(r.get("start", 0), r.get("end", 1) - 1) for r in data.get("extension_range", [])]
    message.extends = _extends_from_descriptor(data.get("extension", []), syntax, Extend)
    return message


# --- the model -> FileDescriptorProto ------------------------------------------------------------

def _descriptor_options(options: list[Any], layout: Layout) -> dict[str, Any] | None:
    known = {name: kind for name, kind, _ in layout.values()}
    out: dict[str, Any] = {}
    for option in options:
        kind = known.get(option.name)
        if kind is None:
            continue  # custom options: not representable without their extension definitions
        value = option.value
        if kind == "enum":
            names = {name: number for number, name in OPTION_ENUMS[option.name].items()}
            value = names.get(getattr(value, "name", str(value)), 0)
        out[option.name] = value
    return out or None


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def _scalar_default(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(getattr(value, "name", value))


def _field_descriptor(fld: Any, syntax: str, oneof_index: dict[str, int], nested: list[dict[str, Any]],
                      scope: str) -> dict[str, Any]:
    data: dict[str, Any] = {"name": fld.name, "number": fld.number}
    label = fld.label or "optional"
    if fld.is_map:
        entry_name = _camel(fld.name) + "Entry"
        key = {"name": "key", "number": 1, "label": 1, "type": _TYPE_NUMBERS[fld.key_type], "json_name": "key"}
        value: dict[str, Any] = {"name": "value", "number": 2, "label": 1, "json_name": "value"}
        if fld.value_kind == "scalar":
            value["type"] = _TYPE_NUMBERS[fld.target]
        else:
            value["type"] = _ENUM if fld.value_kind == "enum" else _MESSAGE
            value["type_name"] = fld.target
        nested.append({"name": entry_name, "field": [key, value], "options": {"map_entry": True}})
        data.update(label=3, type=_MESSAGE, type_name=f".{scope}.{entry_name}")
    elif fld.group is not None:
        nested.append(message_descriptor(fld.group, syntax, f"{scope}.{fld.group.name}"))
        data.update(label=_LABEL_NUMBERS[label], type=_GROUP, type_name=fld.target)
    else:
        data["label"] = _LABEL_NUMBERS[label]
        if fld.kind == "scalar":
            data["type"] = _TYPE_NUMBERS[fld.target]
        else:
            data.update(type=_ENUM if fld.kind == "enum" else _MESSAGE, type_name=fld.target)
    json_name = _json_name(fld.name)
    for option in fld.options:
        if option.name == "default":
            data["default_value"] = _scalar_default(option.value)
        elif option.name == "json_name":
            json_name = option.value
    data["json_name"] = json_name
    if fld.oneof is not None:
        data["oneof_index"] = oneof_index[fld.oneof]
    elif syntax == "proto3" and fld.label == "optional":
        data["proto3_optional"] = True
        data["oneof_index"] = oneof_index["_" + fld.name]
    options = _descriptor_options(fld.options, FIELD_OPTIONS)
    if options:
        data["options"] = options
    return data


def message_descriptor(message: Any, syntax: str, full_name: str) -> dict[str, Any]:
    data: dict[str, Any] = {"name": message.name}
    oneof_names = [o.name for o in message.oneofs]
    if syntax == "proto3":  # proto3 optional fields live in synthetic oneofs, after the real ones
        oneof_names += ["_" + f.name for f in message.fields if f.label == "optional" and f.oneof is None]
    oneof_index = {name: i for i, name in enumerate(oneof_names)}
    nested: list[dict[str, Any]] = []
    data["field"] = [_field_descriptor(f, syntax, oneof_index, nested, full_name) for f in message.fields]
    data["nested_type"] = [message_descriptor(m, syntax, f"{full_name}.{m.name}") for m in message.messages] + nested
    data["enum_type"] = [_enum_descriptor(e) for e in message.enums]
    data["extension_range"] = [{"start": low, "end": high + 1} for low, high in message.extension_ranges]
    data["extension"] = [_field_descriptor(f, syntax, {}, [], full_name) | {"extendee": x.target}
                         for x in message.extends for f in x.fields]
    options = _descriptor_options(message.options, MESSAGE_OPTIONS)
    if options:
        data["options"] = options
    oneofs = [{"name": o.name} for o in message.oneofs] + [{"name": name} for name in oneof_names[len(message.oneofs):]]
    data["oneof_decl"] = oneofs
    data["reserved_range"] = [{"start": low, "end": high + 1} for low, high in message.reserved]
    data["reserved_name"] = list(message.reserved_names)
    return data


def _enum_descriptor(enum: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"name": enum.name, "value": []}
    for value in enum.values:
        entry: dict[str, Any] = {"name": value.name, "number": value.number}
        options = _descriptor_options(value.options, ENUM_VALUE_OPTIONS)
        if options:
            entry["options"] = options
        data["value"].append(entry)
    options = _descriptor_options(enum.options, ENUM_OPTIONS)
    if options:
        data["options"] = options
    data["reserved_range"] = [{"start": low, "end": high} for low, high in enum.reserved]
    data["reserved_name"] = list(enum.reserved_names)
    return data


def encode_file_descriptor(proto: Any, name: str) -> bytes:
    """The linked model as a serialized FileDescriptorProto, as protoc would describe the file."""
    syntax = proto.effective_syntax
    data: dict[str, Any] = {"name": name}
    if proto.package:
        data["package"] = proto.package
    data["dependency"] = [path for path, _ in proto.imports]
    data["public_dependency"] = [i for i, (_, modifier) in enumerate(proto.imports) if modifier == "public"]
    data["weak_dependency"] = [i for i, (_, modifier) in enumerate(proto.imports) if modifier == "weak"]
    package = proto.package
    data["message_type"] = [message_descriptor(m, syntax, f"{package}.{m.name}" if package else m.name)
                            for m in proto.messages]
    data["enum_type"] = [_enum_descriptor(e) for e in proto.enums]
    data["service"] = [{
        "name": service.name,
        "method": [{"name": m.name, "input_type": m.input_target, "output_type": m.output_target,
                    **({"client_streaming": True} if m.client_streaming else {}),
                    **({"server_streaming": True} if m.server_streaming else {}),
                    **({"options": o} if (o := _descriptor_options(m.options, METHOD_OPTIONS)) else {})}
                   for m in service.methods],
        **({"options": o} if (o := _descriptor_options(service.options, SERVICE_OPTIONS)) else {}),
    } for service in proto.services]
    data["extension"] = [_field_descriptor(f, syntax, {}, [], package) | {"extendee": x.target}
                         for x in proto.extends for f in x.fields]
    options = _descriptor_options(proto.options, FILE_OPTIONS)
    if options:
        data["options"] = options
    if syntax == "proto3":
        data["syntax"] = "proto3"
    elif syntax == "editions":
        data["syntax"] = "editions"
        data["edition"] = {name: number for number, name in EDITIONS.items()}[proto.edition]
    return encode(data, FILE)

