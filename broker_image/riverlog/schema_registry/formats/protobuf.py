"""PROTOBUF schemas: parsing with references, canonical and normalized text, and compatibility.

A schema is one ``.proto`` file. Its imports are its references (reference name = import path,
e.g. ``common/money.proto``); the well-known files (``google/protobuf/*.proto``,
``google/type/*.proto``, ``confluent/meta.proto``...) resolve without one, as serializers assume
(:mod:`.protobuf_known`). The text may also be a base64 ``FileDescriptorProto``, which is what
confluent-kafka's ``ProtobufSerializer`` sends (:mod:`.protobuf_wire`).

Compatibility follows Confluent Schema Registry's Protobuf rules: the two files are diffed into
typed differences (``FIELD_REMOVED``, ``FIELD_SCALAR_KIND_CHANGED``...), some of which are
compatible and the rest not; see docs/schema-registry.md, "Protobuf compatibility".
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from antlr4.error.ErrorListener import ErrorListener
from proto_schema_parser import ast
from proto_schema_parser.parser import Parser

from .base import Incompatibility, ParsedSchema, References, SchemaError
from .protobuf_known import KNOWN_FILES
from .protobuf_model import (
    IMPLEMENTATION_RESERVED,
    MAP_KEY_TYPES,
    MAX_FIELD_NUMBER,
    SCALARS,
    Enum,
    EnumValue,
    Extend,
    Field,
    Ident,
    Message,
    Method,
    MsgLit,
    OneOf,
    Option,
    ProtoFile,
    Service,
)

# ---------------------------------------------------------------------------------------------
# Parsing text into the model.
# ---------------------------------------------------------------------------------------------

class _RaiseOnError(ErrorListener):
    # ANTLR's default listener prints to stderr and recovers; a registry must refuse instead.
    def syntaxError(self, recognizer: Any, offendingSymbol: Any, line: int, column: int, msg: str,
                    e: Any) -> None:
        raise SchemaError(f"invalid Protobuf schema: line {line}:{column}: {msg}")


def _setup(recognizer: Any) -> None:
    recognizer.removeErrorListeners()
    recognizer.addErrorListener(_RaiseOnError())


_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{1,2}|[0-7]{1,3}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)", re.S)
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v",
                   "\\": "\\", "'": "'", '"': '"', "?": "?"}


def _unescape(text: str) -> str:
    # The parser keeps string literals as written minus their quotes; the model holds the value.
    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        if code[0] in "xuU":
            return chr(int(code[1:], 16))
        if code[0].isdigit():
            return chr(int(code, 8))
        return _SIMPLE_ESCAPES.get(code, code)
    return _ESCAPE.sub(one, text)


def _escape(text: str) -> str:
    out = []
    for char in text:
        if char in '"\\\'':
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        elif char == "\r":
            out.append("\\r")
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\{ord(char):03o}")
        else:
            out.append(char)
    return "".join(out)


def _option_value(value: Any) -> Any:
    if isinstance(value, ast.Identifier):
        return Ident(value.name)
    if isinstance(value, ast.MessageLiteral):
        return MsgLit(tuple((element.name, _option_value(element.value)) for element in value.elements
                            if isinstance(element, ast.MessageLiteralField)))
    if isinstance(value, list):
        return [_option_value(item) for item in value]
    if isinstance(value, str):
        return _unescape(value)
    return value


def _options(elements: list[Any]) -> list[Option]:
    return [Option(element.name, _option_value(element.value)) for element in elements
            if isinstance(element, ast.Option)]


_LABELS = {ast.FieldCardinality.OPTIONAL: "optional", ast.FieldCardinality.REQUIRED: "required",
           ast.FieldCardinality.REPEATED: "repeated"}


def _ranges(texts: list[str], maximum: int) -> list[tuple[int, int]]:
    ranges = []
    for text in texts:
        low, _, high = (part.strip() for part in text.partition(" to "))
        try:
            start = int(low, 0)
            end = maximum if high == "max" else int(high, 0) if high else start
        except ValueError:
            raise SchemaError(f"invalid Protobuf schema: bad range {text!r}") from None
        if end < start:
            raise SchemaError(f"invalid Protobuf schema: empty range {text!r}")
        ranges.append((start, end))
    return ranges


def _field(node: ast.Field, oneof: str | None = None) -> Field:
    return Field(node.name, node.number, node.type, _LABELS.get(node.cardinality) if node.cardinality else None,
                 _options(node.options), oneof)


def _group(node: ast.Group, oneof: str | None = None) -> Field:
    message = _message(ast.Message(node.name, node.elements))
    label = _LABELS.get(node.cardinality) if node.cardinality else None
    return Field(node.name.lower(), node.number, node.name, label, [], oneof, group=message)


def _message(node: ast.Message) -> Message:
    message = Message(node.name, options=_options(node.elements))
    for element in node.elements:
        if isinstance(element, ast.Field):
            message.fields.append(_field(element))
        elif isinstance(element, ast.Group):
            message.fields.append(_group(element))
        elif isinstance(element, ast.MapField):
            message.fields.append(Field(element.name, element.number, element.value_type, None,
                                        _options(element.options), key_type=element.key_type))
        elif isinstance(element, ast.OneOf):
            message.oneofs.append(OneOf(element.name, _options(element.elements)))
            for member in element.elements:
                if isinstance(member, ast.Field):
                    if member.cardinality is not None:
                        raise SchemaError(f"invalid Protobuf schema: oneof field {member.name!r} has a label")
                    message.fields.append(_field(member, element.name))
                elif isinstance(member, ast.Group):
                    message.fields.append(_group(member, element.name))
        elif isinstance(element, ast.Message):
            message.messages.append(_message(element))
        elif isinstance(element, ast.Enum):
            message.enums.append(_enum(element))
        elif isinstance(element, ast.Reserved):
            message.reserved += _ranges(element.ranges, MAX_FIELD_NUMBER)
            message.reserved_names += element.names
        elif isinstance(element, ast.ExtensionRange):
            message.extension_ranges += _ranges(element.ranges, MAX_FIELD_NUMBER)
        elif isinstance(element, ast.Extension):
            message.extends.append(_extend(element))
    return message


def _enum(node: ast.Enum) -> Enum:
    enum = Enum(node.name, options=_options(node.elements))
    for element in node.elements:
        if isinstance(element, ast.EnumValue):
            enum.values.append(EnumValue(element.name, element.number, _options(element.options)))
        elif isinstance(element, ast.EnumReserved):
            enum.reserved += _ranges(element.ranges, 2 ** 31 - 1)
            enum.reserved_names += element.names
    return enum


def _extend(node: ast.Extension) -> Extend:
    fields = [_field(element) if isinstance(element, ast.Field) else _group(element)
              for element in node.elements if isinstance(element, (ast.Field, ast.Group))]
    return Extend(node.typeName, fields)


def _service(node: ast.Service) -> Service:
    service = Service(node.name, options=_options(node.elements))
    for element in node.elements:
        if isinstance(element, ast.Method):
            service.methods.append(Method(
                element.name, element.input_type.type, element.output_type.type, element.input_type.stream,
                element.output_type.stream, _options(element.elements)))
    return service


def parse_proto_text(path: str, text: str) -> ProtoFile:
    """The model of one ``.proto`` text, not yet linked or validated."""
    try:
        tree = Parser(setup_lexer=_setup, setup_parser=_setup).parse(text)
    except SchemaError:
        raise
    except Exception as error:  # the parser's own checks (e.g. int() of a field number)
        raise SchemaError(f"invalid Protobuf schema: {error}") from None
    proto = ProtoFile(path, tree.syntax, tree.edition)
    packages = [element.name for element in tree.file_elements if isinstance(element, ast.Package)]
    if len(packages) > 1:
        raise SchemaError("invalid Protobuf schema: more than one package statement")
    proto.package = packages[0] if packages else ""
    proto.options = _options(tree.file_elements)
    for element in tree.file_elements:
        if isinstance(element, ast.Import):
            proto.imports.append((element.name, "public" if element.public else "weak" if element.weak else ""))
        elif isinstance(element, ast.Message):
            proto.messages.append(_message(element))
        elif isinstance(element, ast.Enum):
            proto.enums.append(_enum(element))
        elif isinstance(element, ast.Extension):
            proto.extends.append(_extend(element))
        elif isinstance(element, ast.Service):
            proto.services.append(_service(element))
    return proto


# ---------------------------------------------------------------------------------------------
# Loading references, linking names and validating.
# ---------------------------------------------------------------------------------------------

def _walk_messages(messages: list[Message], scope: str) -> Iterator[tuple[str, Message]]:
    """(scope the message is declared in, message), outer first; groups' messages included."""
    for message in messages:
        yield scope, message
        inner = _join(scope, message.name)
        yield from _walk_messages(message.messages, inner)
        yield from _walk_messages([f.group for f in message.fields if f.group is not None], inner)


def _walk_declared(proto: ProtoFile, attribute: str) -> Iterator[tuple[str, Any]]:
    """(scope, item) for each of the file's and its messages' ``enums`` or ``extends``."""
    for item in getattr(proto, attribute):
        yield proto.package, item
    for scope, message in _walk_messages(proto.messages, proto.package):
        for item in getattr(message, attribute):
            yield _join(scope, message.name), item


def _walk_enums(proto: ProtoFile) -> Iterator[tuple[str, Enum]]:
    return _walk_declared(proto, "enums")


def _walk_extends(proto: ProtoFile) -> Iterator[tuple[str, Extend]]:
    return _walk_declared(proto, "extends")


def _join(scope: str, name: str) -> str:
    return f"{scope}.{name}" if scope else name


class _Files:
    """Every file a schema needs, loaded once each: the schema, its references, known files."""

    def __init__(self, references: References) -> None:
        self.references = references
        self.files: dict[str, ProtoFile] = {}
        # full type name (no leading dot) -> ("message" | "enum", definition, defining file)
        self.types: dict[str, tuple[str, Message | Enum, ProtoFile]] = {}
        self._loading: list[str] = []

    def load(self, path: str, text: str) -> ProtoFile:
        if path in self.files:
            return self.files[path]
        if path in self._loading:
            raise SchemaError(f"invalid Protobuf schema: import cycle {' -> '.join(self._loading + [path])}")
        self._loading.append(path)
        proto = parse_any(path, text)
        seen: set[str] = set()
        for imported, _ in proto.imports:
            if imported in seen:
                raise SchemaError(f"invalid Protobuf schema: {imported!r} is imported twice")
            seen.add(imported)
            if imported in self.references:
                self.load(imported, self.references[imported])
            elif imported in KNOWN_FILES:
                self.load(imported, KNOWN_FILES[imported])
            else:
                raise SchemaError(f"invalid Protobuf schema: import {imported!r} is neither a reference "
                                  f"nor a well-known file")
        self._loading.pop()
        self._register(proto)
        _link(proto, self)
        _validate(proto)
        self.files[path] = proto
        return proto

    def _register(self, proto: ProtoFile) -> None:
        for scope, message in _walk_messages(proto.messages, proto.package):
            message.full_name = _join(scope, message.name)
            self._add(message.full_name, "message", message, proto)
        for scope, enum in _walk_enums(proto):
            enum.full_name = _join(scope, enum.name)
            self._add(enum.full_name, "enum", enum, proto)

    def _add(self, name: str, kind: str, definition: Message | Enum, proto: ProtoFile) -> None:
        if name in self.types:
            raise SchemaError(f"invalid Protobuf schema: {name!r} is already defined in {self.types[name][2].path!r}")
        self.types[name] = (kind, definition, proto)

    def visible(self, proto: ProtoFile) -> set[str]:
        """Paths whose types ``proto`` may use: itself, its imports, and what they import publicly."""
        paths = {proto.path}
        todo = [path for path, _ in proto.imports]
        while todo:
            path = todo.pop()
            if path not in paths:
                paths.add(path)
                todo += [p for p, modifier in self.files[path].imports if modifier == "public"]
        return paths


def _resolve(name: str, scope: str, files: _Files, visible: set[str]) -> tuple[str, str] | None:
    """(kind, full name) of type ``name`` used in ``scope``, by protobuf's scoping rules: a
    leading dot means fully qualified; otherwise the innermost scope that has the name's first
    component wins."""
    def lookup(full: str) -> tuple[str, str] | None:
        entry = files.types.get(full)
        return (entry[0], full) if entry is not None and entry[2].path in visible else None

    if name.startswith("."):
        return lookup(name[1:])
    first = name.split(".")[0]
    packages = {".".join(f.package.split(".")[:i + 1]) for path in visible
                for f in [files.files.get(path)] if f is not None and f.package
                for i in range(len(f.package.split(".")))}
    parts = scope.split(".") if scope else []
    for depth in range(len(parts), -1, -1):
        prefix = ".".join(parts[:depth])
        found = lookup(_join(prefix, name))
        if found is not None:
            return found
        head = _join(prefix, first)
        # When the first component names a scope here (a package or message), protoc stops
        # looking further out; an enum is a leaf, nothing resolves inside it, so it goes on.
        if head in packages or (head in files.types and files.types[head][0] == "message"):
            return None
    return None


def _link_field(fld: Field, scope: str, proto: ProtoFile, files: _Files, visible: set[str]) -> None:
    def kind_of(type_name: str) -> tuple[str, str]:
        if type_name in SCALARS:
            return "scalar", type_name
        found = _resolve(type_name, scope, files, visible)
        if found is None:
            raise SchemaError(f"invalid Protobuf schema: unknown type {type_name!r} of field {fld.name!r} in {scope}")
        return found[0], "." + found[1]

    if fld.group is not None:
        fld.kind, fld.target = "message", "." + _join(scope, fld.group.name)
    elif fld.is_map:
        if fld.key_type not in MAP_KEY_TYPES:
            raise SchemaError(f"invalid Protobuf schema: map field {fld.name!r} in {scope} has key type "
                              f"{fld.key_type!r}; keys are integral or string scalars")
        fld.kind = "map"
        fld.value_kind, fld.target = kind_of(fld.type)
    else:
        fld.kind, fld.target = kind_of(fld.type)


def _link(proto: ProtoFile, files: _Files) -> None:
    visible = files.visible(proto)
    for scope, message in _walk_messages(proto.messages, proto.package):
        for fld in message.fields:
            _link_field(fld, _join(scope, message.name), proto, files, visible)
    for scope, extend in _walk_extends(proto):
        found = _resolve(extend.extendee, scope, files, visible)
        if found is None or found[0] != "message":
            raise SchemaError(f"invalid Protobuf schema: extended type {extend.extendee!r} is not a known message")
        extend.target = "." + found[1]
        for fld in extend.fields:
            _link_field(fld, scope, proto, files, visible)
    for service in proto.services:
        for method in service.methods:
            for attribute in ("input", "output"):
                type_name = getattr(method, f"{attribute}_type")
                found = _resolve(type_name, proto.package, files, visible)
                if found is None or found[0] != "message":
                    raise SchemaError(f"invalid Protobuf schema: {attribute} type {type_name!r} of rpc "
                                      f"{method.name!r} is not a known message")
                setattr(method, f"{attribute}_target", "." + found[1])


def _in_ranges(number: int, ranges: list[tuple[int, int]]) -> bool:
    return any(low <= number <= high for low, high in ranges)


def _has_option(options: list[Option], name: str) -> bool:
    return any(option.name == name and option.value is True for option in options)


def _validate_message(message: Message, syntax: str) -> None:
    where = message.full_name
    numbers: dict[int, str] = {}
    names: set[str] = set()
    for fld in message.fields:
        if not 1 <= fld.number <= MAX_FIELD_NUMBER:
            raise SchemaError(f"invalid Protobuf schema: field {where}.{fld.name} has number {fld.number}, "
                              f"outside 1..{MAX_FIELD_NUMBER}")
        if IMPLEMENTATION_RESERVED[0] <= fld.number <= IMPLEMENTATION_RESERVED[1]:
            raise SchemaError(f"invalid Protobuf schema: field {where}.{fld.name} has number {fld.number}; "
                              f"19000..19999 are reserved for the protobuf implementation")
        if fld.number in numbers:
            raise SchemaError(f"invalid Protobuf schema: fields {where}.{numbers[fld.number]} and "
                              f"{where}.{fld.name} both have number {fld.number}")
        if fld.name in names:
            raise SchemaError(f"invalid Protobuf schema: field name {where}.{fld.name} is used twice")
        if _in_ranges(fld.number, message.reserved):
            raise SchemaError(f"invalid Protobuf schema: field {where}.{fld.name} uses reserved number {fld.number}")
        if fld.name in message.reserved_names:
            raise SchemaError(f"invalid Protobuf schema: field {where}.{fld.name} uses a reserved name")
        if _in_ranges(fld.number, message.extension_ranges):
            raise SchemaError(f"invalid Protobuf schema: field {where}.{fld.name} uses number {fld.number} "
                              f"of an extension range")
        numbers[fld.number] = fld.name
        names.add(fld.name)
        if syntax == "proto2" and fld.label is None and fld.oneof is None and not fld.is_map:
            raise SchemaError(f"invalid Protobuf schema: proto2 field {where}.{fld.name} needs a label "
                              f"(optional, required or repeated)")
        if syntax == "proto3" and fld.label == "required":
            raise SchemaError(f"invalid Protobuf schema: proto3 has no required fields ({where}.{fld.name})")
        if syntax == "editions" and fld.label in ("required", "optional"):
            raise SchemaError(f"invalid Protobuf schema: editions have no {fld.label!r} label "
                              f"({where}.{fld.name}); use features.field_presence")
        if syntax != "proto2" and fld.group is not None:
            raise SchemaError(f"invalid Protobuf schema: groups are proto2 only ({where}.{fld.name})")
        if syntax == "proto3" and any(option.name == "default" for option in fld.options):
            raise SchemaError(f"invalid Protobuf schema: proto3 fields have no explicit default ({where}.{fld.name})")
        if fld.is_map and fld.value_kind == "map":
            raise SchemaError(f"invalid Protobuf schema: map values cannot be maps ({where}.{fld.name})")
    scope_names = [f.name for f in message.fields] + [o.name for o in message.oneofs] + \
        [m.name for m in message.messages] + [e.name for e in message.enums] + \
        [v.name for e in message.enums for v in e.values]
    duplicates = sorted({name for name in scope_names if scope_names.count(name) > 1})
    if duplicates:
        raise SchemaError(f"invalid Protobuf schema: {', '.join(duplicates)} defined twice in {where}")
    for oneof in message.oneofs:
        if not any(f.oneof == oneof.name for f in message.fields):
            raise SchemaError(f"invalid Protobuf schema: oneof {where}.{oneof.name} has no fields")


def _validate_enum(enum: Enum, syntax: str) -> None:
    where = enum.full_name
    if not enum.values:
        raise SchemaError(f"invalid Protobuf schema: enum {where} has no values")
    if syntax == "proto3" and enum.values[0].number != 0:
        raise SchemaError(f"invalid Protobuf schema: the first value of proto3 enum {where} must be 0")
    seen: dict[int, str] = {}
    names: set[str] = set()
    for value in enum.values:
        if not -2 ** 31 <= value.number < 2 ** 31:
            raise SchemaError(f"invalid Protobuf schema: {where}.{value.name} is outside int32")
        if value.name in names:
            raise SchemaError(f"invalid Protobuf schema: {where}.{value.name} is defined twice")
        if value.number in seen and not _has_option(enum.options, "allow_alias"):
            raise SchemaError(f"invalid Protobuf schema: {where}.{value.name} and {where}.{seen[value.number]} "
                              f"share number {value.number} (set option allow_alias = true for aliases)")
        if _in_ranges(value.number, enum.reserved) or value.name in enum.reserved_names:
            raise SchemaError(f"invalid Protobuf schema: {where}.{value.name} uses a reserved number or name")
        seen.setdefault(value.number, value.name)
        names.add(value.name)


def _validate(proto: ProtoFile) -> None:
    syntax = proto.effective_syntax
    if proto.syntax not in (None, "proto2", "proto3", "editions"):
        raise SchemaError(f"invalid Protobuf schema: unknown syntax {proto.syntax!r}")
    if proto.edition is not None and proto.edition not in ("2023", "2024"):
        raise SchemaError(f"invalid Protobuf schema: unknown edition {proto.edition!r}")
    top = [m.name for m in proto.messages] + [e.name for e in proto.enums] + [s.name for s in proto.services] \
        + [v.name for e in proto.enums for v in e.values]
    duplicates = sorted({name for name in top if top.count(name) > 1})
    if duplicates:
        raise SchemaError(f"invalid Protobuf schema: {', '.join(duplicates)} defined twice")
    for _, message in _walk_messages(proto.messages, proto.package):
        _validate_message(message, syntax)
    for _, enum in _walk_enums(proto):
        _validate_enum(enum, syntax)
    for _, extend in _walk_extends(proto):
        for fld in extend.fields:
            if not 1 <= fld.number <= MAX_FIELD_NUMBER:
                raise SchemaError(f"invalid Protobuf schema: extension {fld.name} has number {fld.number}")


def parse_any(path: str, text: str) -> ProtoFile:
    """.proto text, or else a base64 FileDescriptorProto (what confluent-kafka sends)."""
    try:
        return parse_proto_text(path, text)
    except SchemaError as text_error:
        from .protobuf_wire import decode_file_descriptor  # only needed for descriptor input
        proto = decode_file_descriptor(path, text)
        if proto is None:
            raise text_error from None
        return proto


# ---------------------------------------------------------------------------------------------
# Rendering: canonical text (as declared) and normalized text.
# ---------------------------------------------------------------------------------------------

def _value_text(value: Any, indent: str = "") -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{_escape(value)}"'
    if isinstance(value, Ident):
        return value.name
    if isinstance(value, list):
        return "[" + ", ".join(_value_text(item, indent) for item in value) + "]"
    if isinstance(value, MsgLit):
        if not value.fields:
            return "{}"
        inner = indent + "  "
        body = ",\n".join(f"{inner}{key}: {_value_text(item, inner)}" for key, item in value.fields)
        return "{\n" + body + "\n" + indent + "}"
    return repr(value) if isinstance(value, float) else str(value)


def _sorted_value(value: Any) -> Any:
    if isinstance(value, MsgLit):
        return MsgLit(tuple(sorted(((key, _sorted_value(item)) for key, item in value.fields),
                                   key=lambda pair: pair[0])))
    if isinstance(value, list):
        return [_sorted_value(item) for item in value]
    return value


def _option_text(option: Option, normalize: bool) -> str:
    value = _sorted_value(option.value) if normalize else option.value
    return f"{option.name} = {_value_text(value)}"


def _options_of(options: list[Option], normalize: bool) -> list[Option]:
    return sorted(options, key=lambda option: option.name) if normalize else options


def _compact_options(options: list[Option], normalize: bool) -> str:
    if not options:
        return ""
    texts = [_option_text(option, normalize) for option in _options_of(options, normalize)]
    if len(texts) == 1:
        return f" [{texts[0]}]"
    return " [\n" + ",\n".join("  " + line for text in texts for line in text.split("\n")) + "\n]"


def _indent(text: str) -> str:
    return "".join(f"  {line}\n" if line else "\n" for line in text.rstrip("\n").split("\n"))


def _range_text(low: int, high: int, maximum: int) -> str:
    if low == high:
        return str(low)
    return f"{low} to {'max' if high == maximum else high}"


def _field_text(fld: Field, normalize: bool) -> str:
    if fld.group is not None:
        label = f"{fld.label} " if fld.label else ""
        return f"{label}group {fld.group.name} = {fld.number} {{\n{_indent(_message_body(fld.group, normalize))}}}\n"
    if fld.is_map:
        value = fld.target if normalize and fld.value_kind != "scalar" else fld.type
        type_text = f"map<{fld.key_type}, {value}>"
        label = ""
    else:
        type_text = fld.target if normalize and fld.kind != "scalar" else fld.type
        label = f"{fld.label} " if fld.label else ""
    return f"{label}{type_text} {fld.name} = {fld.number}{_compact_options(fld.options, normalize)};\n"


def _reserved_lines(ranges: list[tuple[int, int]], names: list[str], maximum: int, normalize: bool) -> list[str]:
    if normalize:
        # One value a line, numbers in order then names, so how they were grouped does not matter.
        return [f"reserved {_range_text(low, high, maximum)};\n" for low, high in sorted(ranges)] + \
            [f'reserved "{name}";\n' for name in sorted(names)]
    lines = []
    if ranges:
        lines.append("reserved " + ", ".join(_range_text(low, high, maximum) for low, high in ranges) + ";\n")
    if names:
        lines.append("reserved " + ", ".join(f'"{name}"' for name in names) + ";\n")
    return lines


def _sections(sections: list[str]) -> str:
    # One blank line between the sections of a body, none before the first.
    return "\n".join(section for section in sections if section)


def _message_body(message: Message, normalize: bool) -> str:
    fields = [f for f in message.fields if f.oneof is None]
    if normalize:
        fields.sort(key=lambda f: f.number)
    oneofs = []
    for oneof in message.oneofs:
        members = [f for f in message.fields if f.oneof == oneof.name]
        if normalize:
            members.sort(key=lambda f: f.number)
        oneofs.append((oneof, members))
    if normalize:
        oneofs = sorted((pair for pair in oneofs if pair[1]), key=lambda pair: pair[1][0].number)
    oneof_texts = []
    for oneof, members in oneofs:
        body = "".join(f"option {_option_text(o, normalize)};\n" for o in _options_of(oneof.options, normalize))
        body += "".join(_field_text(f, normalize) for f in members)
        oneof_texts.append(f"oneof {oneof.name} {{\n{_indent(body)}}}\n")
    return _sections([
        "".join(_reserved_lines(message.reserved, message.reserved_names, MAX_FIELD_NUMBER, normalize)),
        "".join(f"option {_option_text(o, normalize)};\n" for o in _options_of(message.options, normalize)),
        "".join(_field_text(f, normalize) for f in fields),
        "".join(oneof_texts),
        "".join(f"extensions {_range_text(low, high, MAX_FIELD_NUMBER)};\n" for low, high in message.extension_ranges),
        "".join(_extend_text(extend, normalize) for extend in message.extends),
        "".join(_message_text(m, normalize) for m in message.messages)
        + "".join(_enum_text(e, normalize) for e in message.enums),
    ])


def _message_text(message: Message, normalize: bool) -> str:
    body = _message_body(message, normalize)
    return f"message {message.name} {{\n{_indent(body)}}}\n" if body else f"message {message.name} {{}}\n"


def _enum_text(enum: Enum, normalize: bool) -> str:
    values = sorted(enum.values, key=lambda v: (v.number, v.name)) if normalize else enum.values
    body = _sections([
        "".join(_reserved_lines(enum.reserved, enum.reserved_names, 2 ** 31 - 1, normalize)),
        "".join(f"option {_option_text(o, normalize)};\n" for o in _options_of(enum.options, normalize))
        + "".join(f"{v.name} = {v.number}{_compact_options(v.options, normalize)};\n" for v in values),
    ])
    return f"enum {enum.name} {{\n{_indent(body)}}}\n"


def _extend_text(extend: Extend, normalize: bool) -> str:
    extendee = extend.target if normalize else extend.extendee
    body = "".join(_field_text(f, normalize) for f in extend.fields)
    return f"extend {extendee} {{\n{_indent(body)}}}\n"


def _service_text(service: Service, normalize: bool) -> str:
    lines = [f"option {_option_text(o, normalize)};\n" for o in _options_of(service.options, normalize)]
    for method in service.methods:
        request = method.input_target if normalize else method.input_type
        response = method.output_target if normalize else method.output_type
        text = (f"rpc {method.name} ({'stream ' if method.client_streaming else ''}{request}) returns "
                f"({'stream ' if method.server_streaming else ''}{response})")
        if method.options:
            options = "".join(f"option {_option_text(o, normalize)};\n"
                              for o in _options_of(method.options, normalize))
            text += " {\n" + _indent(options) + "}"
        lines.append(text + ";\n")
    return f"service {service.name} {{\n{_indent(''.join(lines))}}}\n"


def render(proto: ProtoFile, normalize: bool = False) -> str:
    """The file as .proto text, in the layout Confluent's registry answers with: syntax and
    package, imports, options, then messages, enums, extensions and services, comments dropped.
    Messages keep their order even when normalized: serializers address them by index."""
    head = ""
    if proto.edition is not None:
        head += f'edition = "{proto.edition}";\n'
    elif proto.syntax is not None or normalize:  # no syntax statement means proto2
        head += f'syntax = "{proto.effective_syntax}";\n'
    if proto.package:
        head += f"package {proto.package};\n"
    imports = list(proto.imports)
    if normalize:
        imports = sorted(set(imports), key=lambda item: (item[1], item[0]))
    import_text = "".join(f'import {modifier + " " if modifier else ""}"{path}";\n' for path, modifier in imports)
    option_text = "".join(f"option {_option_text(o, normalize)};\n" for o in _options_of(proto.options, normalize))
    types = "".join(_message_text(m, normalize) for m in proto.messages) + \
        "".join(_enum_text(e, normalize) for e in proto.enums)
    parts = [head] + [part for part in (import_text, option_text, types,
                                        "".join(_extend_text(x, normalize) for x in proto.extends),
                                        "".join(_service_text(s, normalize) for s in proto.services)) if part]
    return "\n".join(parts)


# ---------------------------------------------------------------------------------------------
# Compatibility: Confluent's Protobuf differences between a writer and a reader file.
# ---------------------------------------------------------------------------------------------

# Differences a reader tolerates (Confluent's SchemaDiff.COMPATIBLE_CHANGES); every other kind
# breaks compatibility.
COMPATIBLE_DIFFERENCES = frozenset({
    "MESSAGE_ADDED", "MESSAGE_MOVED", "ENUM_ADDED", "ENUM_REMOVED", "ENUM_CONST_ADDED", "ENUM_CONST_CHANGED",
    "ENUM_CONST_REMOVED", "FIELD_ADDED", "FIELD_REMOVED", "FIELD_NAME_CHANGED",
    "FIELD_STRING_OR_BYTES_LABEL_CHANGED", "ONEOF_ADDED", "ONEOF_REMOVED", "ONEOF_FIELD_ADDED",
})

_DESCRIPTIONS = {
    "PACKAGE_CHANGED": "The package changed",
    "MESSAGE_REMOVED": "A message the writer has is missing from the reader",
    "FIELD_KIND_CHANGED": "A field changed between scalar (or enum), message and map",
    "FIELD_SCALAR_KIND_CHANGED": "A field's scalar type changed to one that is not wire compatible",
    "FIELD_NAMED_TYPE_CHANGED": "A field's message type changed",
    "FIELD_NUMERIC_LABEL_CHANGED": "A numeric field changed between optional, required and repeated",
    "REQUIRED_FIELD_ADDED": "The reader has a required field the writer does not write",
    "REQUIRED_FIELD_REMOVED": "The writer has a required field the reader does not have",
    "ONEOF_FIELD_REMOVED": "A field of a oneof the writer sets is missing from the reader's oneof",
    "MULTIPLE_FIELDS_MOVED_TO_ONEOF": "More than one existing field was moved into a oneof",
    "FIELD_MOVED_TO_EXISTING_ONEOF": "A field was moved into a oneof that already had fields",
}

# Wire-compatible groups of scalar types (protobuf's "Updating A Message Type"): a reader may
# use any type of the writer's group. Enums count as GENERAL_NUMBER (varints).
_SCALAR_GROUPS = {
    **dict.fromkeys(("int32", "int64", "uint32", "uint64", "bool"), "GENERAL_NUMBER"),
    **dict.fromkeys(("sint32", "sint64"), "SIGNED_NUMBER"),
    **dict.fromkeys(("string", "bytes"), "STRING_OR_BYTES"),
    **dict.fromkeys(("fixed32", "sfixed32"), "FIXED32"),
    **dict.fromkeys(("fixed64", "sfixed64"), "FIXED64"),
    "float": "FLOAT", "double": "DOUBLE",
}


class _Diff:
    def __init__(self, writer: ProtobufSchema, reader: ProtobufSchema) -> None:
        self.writer, self.reader = writer, reader
        self.differences: list[tuple[str, str]] = []
        self.path: list[str] = []
        self._comparing: set[tuple[str, str]] = set()  # imported message pairs being compared

    def add(self, kind: str, *where: str) -> None:
        self.differences.append((kind, "#/" + "/".join(self.path + list(where))))

    def files(self) -> None:
        w, r = self.writer.proto, self.reader.proto
        if w.package != r.package:
            self.add("PACKAGE_CHANGED")
        self.types(w.messages, w.enums, r.messages, r.enums)

    def types(self, w_messages: list[Message], w_enums: list[Enum], r_messages: list[Message],
              r_enums: list[Enum]) -> None:
        w_index = {m.name: i for i, m in enumerate(w_messages)}
        r_index = {m.name: i for i, m in enumerate(r_messages)}
        by_name = {m.name: m for m in r_messages}
        for name, index in w_index.items():
            self.path.append(name)
            if name not in by_name and not _is_map_entry(w_messages[index]):
                self.add("MESSAGE_REMOVED")
            elif name in by_name:
                self.message(w_messages[index], by_name[name])
                if r_index[name] != index:
                    self.add("MESSAGE_MOVED")  # serialized message indexes refer to the writer's schema
            self.path.pop()
        for name in r_index.keys() - w_index.keys():
            self.add("MESSAGE_ADDED", name)
        w_enum = {e.name: e for e in w_enums}
        r_enum = {e.name: e for e in r_enums}
        for name in w_enum.keys() | r_enum.keys():
            if name not in r_enum:
                self.add("ENUM_REMOVED", name)
            elif name not in w_enum:
                self.add("ENUM_ADDED", name)
            else:
                self.path.append(name)
                self.enum(w_enum[name], r_enum[name])
                self.path.pop()

    def enum(self, w: Enum, r: Enum) -> None:
        w_values = {v.number: v.name for v in reversed(w.values)}  # an alias's first name wins
        r_values = {v.number: v.name for v in reversed(r.values)}
        for number in sorted(w_values.keys() | r_values.keys()):
            if number not in r_values:
                self.add("ENUM_CONST_REMOVED", str(number))
            elif number not in w_values:
                self.add("ENUM_CONST_ADDED", str(number))
            elif w_values[number] != r_values[number]:
                self.add("ENUM_CONST_CHANGED", str(number))

    def message(self, w: Message, r: Message) -> None:
        w_top = {f.number: f for f in w.fields if f.oneof is None}
        r_top = {f.number: f for f in r.fields if f.oneof is None}
        w_all = {f.number: f for f in w.fields}
        r_all = {f.number: f for f in r.fields}
        w_in_oneof = {f.number for f in w.fields if f.oneof is not None}
        # Fields the reader moved into one of its oneofs: fine for one field (a oneof of one set
        # field reads the same), but two moved together could both be set in old data.
        for oneof in r.oneofs:
            members = [f for f in r.fields if f.oneof == oneof.name]
            moved = [f.number for f in members if f.number in w_top]
            existing = [f.number for f in members if f.number in w_in_oneof]
            for number in moved:
                del w_top[number]  # moved, not removed
            if len(moved) > 1:
                self.add("MULTIPLE_FIELDS_MOVED_TO_ONEOF", oneof.name)
            elif len(moved) == 1 and existing:
                self.add("FIELD_MOVED_TO_EXISTING_ONEOF", oneof.name)
        w_oneofs = {o.name for o in w.oneofs}
        r_oneofs = {o.name for o in r.oneofs}
        for name in sorted(w_oneofs | r_oneofs):
            if name not in r_oneofs:
                self.add("ONEOF_REMOVED", name)
            elif name not in w_oneofs:
                self.add("ONEOF_ADDED", name)
            else:
                w_members = {f.number: f for f in w.fields if f.oneof == name}
                r_members = {f.number: f for f in r.fields if f.oneof == name}
                for number in sorted(w_members.keys() | r_members.keys()):
                    if number not in r_members:
                        if number not in r_all:  # relocated elsewhere in the reader is no removal
                            self.add("ONEOF_FIELD_REMOVED", name, str(number))
                    elif number not in w_members:
                        self.add("ONEOF_FIELD_ADDED", name, str(number))
                    else:
                        self.path += [name, str(number)]
                        self.field(w_members[number], r_members[number])
                        del self.path[-2:]
        for number in sorted(w_top.keys() | r_top.keys()):
            if number not in r_top:
                removed = w_top[number]
                self.add("REQUIRED_FIELD_REMOVED" if removed.label == "required" else "FIELD_REMOVED", str(number))
            elif number not in w_top:
                added = r_top[number]
                self.add("REQUIRED_FIELD_ADDED" if added.label == "required" else "FIELD_ADDED", str(number))
            else:
                self.path.append(str(number))
                self.field(w_top[number], r_top[number])
                self.path.pop()
        # Fields whose oneof membership changed are compared by number too.
        for number in sorted(w_all.keys() & r_all.keys()):
            w_oneof, r_oneof = w_all[number].oneof, r_all[number].oneof
            if (w_oneof is None and r_oneof is None) or (w_oneof is not None and w_oneof == r_oneof):
                continue
            self.path.append(str(number))
            self.field(w_all[number], r_all[number])
            self.path.pop()
        self.types(w.messages, w.enums, r.messages, r.enums)

    def field(self, w: Field, r: Field) -> None:
        if w.name != r.name:
            self.add("FIELD_NAME_CHANGED")
        w_kind, r_kind = _kind(w.kind), _kind(r.kind)
        if w.group is not None and r.group is not None:
            # A group's message is declared inline, so it is compared with its field.
            self.message(w.group, r.group)
        elif w_kind != r_kind:
            self.add("FIELD_KIND_CHANGED")
        elif w_kind == "MAP":
            if _SCALAR_GROUPS[w.key_type or ""] != _SCALAR_GROUPS[r.key_type or ""]:
                self.add("FIELD_SCALAR_KIND_CHANGED")
            self.value(w.value_kind, w.target, None, r.value_kind, r.target, None)
        else:
            self.value(w.kind, w.target, w.label, r.kind, r.target, r.label)

    def value(self, w_kind: str, w_target: str, w_label: str | None, r_kind: str, r_target: str,
              r_label: str | None) -> None:
        if _kind(w_kind) != _kind(r_kind):
            self.add("FIELD_KIND_CHANGED")
        elif _kind(w_kind) == "SCALAR":
            w_group = "GENERAL_NUMBER" if w_kind == "enum" else _SCALAR_GROUPS[w_target]
            r_group = "GENERAL_NUMBER" if r_kind == "enum" else _SCALAR_GROUPS[r_target]
            if w_group != r_group:
                self.add("FIELD_SCALAR_KIND_CHANGED")
            elif w_label is not None and r_label is not None and w_label != r_label:
                # Only a written label counts: proto3's unlabelled and optional are the same
                # on the wire.
                self.add("FIELD_STRING_OR_BYTES_LABEL_CHANGED" if w_group == "STRING_OR_BYTES"
                         else "FIELD_NUMERIC_LABEL_CHANGED")
        else:
            self.named_types(w_target, r_target)

    def named_types(self, w_target: str, r_target: str) -> None:
        w_entry = self.writer.types.get(w_target[1:])
        r_entry = self.reader.types.get(r_target[1:])
        if w_entry is None or r_entry is None:
            if w_target != r_target:
                self.add("FIELD_NAMED_TYPE_CHANGED")
            return
        w_local = _local_name(w_target[1:], w_entry[2].package)
        r_local = _local_name(r_target[1:], r_entry[2].package)
        if w_local != r_local:
            self.add("FIELD_NAMED_TYPE_CHANGED")
            return
        w_imported = w_entry[2] is not self.writer.proto
        r_imported = r_entry[2] is not self.reader.proto
        if not (w_imported or r_imported):
            return  # both in the schema itself: compared where they are declared
        w_message, r_message = w_entry[1], r_entry[1]
        pair = (w_target, r_target)
        if not isinstance(w_message, Message) or not isinstance(r_message, Message) or pair in self._comparing:
            return
        # A type from a reference (which may be another version on either side): compare it here.
        self._comparing.add(pair)
        before = len(self.differences)
        self.message(w_message, r_message)
        self._comparing.discard(pair)
        if any(kind not in COMPATIBLE_DIFFERENCES for kind, _ in self.differences[before:]):
            self.add("FIELD_NAMED_TYPE_CHANGED")


def _kind(kind: str) -> str:
    return {"scalar": "SCALAR", "enum": "SCALAR", "message": "MESSAGE", "map": "MAP"}[kind]


def _local_name(full_name: str, package: str) -> str:
    return full_name[len(package) + 1:] if package and full_name.startswith(package + ".") else full_name


def _is_map_entry(message: Message) -> bool:
    return _has_option(message.options, "map_entry")


# ---------------------------------------------------------------------------------------------
# The schema.
# ---------------------------------------------------------------------------------------------

class ProtobufSchema(ParsedSchema):
    """A parsed, linked and validated ``.proto`` file with the files it imports."""

    schema_type = "PROTOBUF"

    def __init__(self, proto: ProtoFile, files: _Files) -> None:
        self.proto = proto
        #: import path -> file, for every file this one needs (directly or not)
        self.dependencies = {path: f for path, f in files.files.items() if f is not proto}
        self.types = files.types
        self._canonical = render(proto)
        self._normalized = render(proto, normalize=True)

    def canonical(self) -> str:
        return self._canonical

    def normalized(self) -> str:
        return self._normalized

    @property
    def message_names(self) -> list[str]:
        """Fully qualified names of the top-level messages, in order (the first is what
        serializers use when the message index is ``[0]``)."""
        return [m.full_name for m in self.proto.messages]

    def differences(self, writer: ParsedSchema) -> list[tuple[str, str]]:
        """Every difference (kind, path) between ``writer`` and this schema as the reader,
        compatible or not."""
        if not isinstance(writer, ProtobufSchema):
            return [("SCHEMA_TYPE_CHANGED", "#/")]
        diff = _Diff(writer, self)
        diff.files()
        return diff.differences

    def read_errors(self, writer: ParsedSchema) -> list[Incompatibility]:
        return [Incompatibility(kind, path, _DESCRIPTIONS.get(kind, kind))
                for kind, path in self.differences(writer) if kind not in COMPATIBLE_DIFFERENCES]

    def file_descriptor_proto(self, name: str | None = None) -> bytes:
        """The schema as a serialized ``google.protobuf.FileDescriptorProto``."""
        from .protobuf_wire import encode_file_descriptor
        return encode_file_descriptor(self.proto, name or self.proto.path)

    def serialized(self) -> str:
        """``format=serialized``: base64 of :meth:`file_descriptor_proto`, what confluent-kafka's
        deserializers ask the registry for."""
        import base64
        return base64.standard_b64encode(self.file_descriptor_proto()).decode("ascii")


# The name the schema itself gets among its files; an import of it by that name would be a cycle.
_SCHEMA_PATH = "<schema>"


def parse_protobuf(text: str, references: References) -> ProtobufSchema:
    """Parse a PROTOBUF schema (``.proto`` text or a base64 FileDescriptorProto); its imports
    come from ``references`` (import path -> text) or are well-known files."""
    files = _Files(references)
    proto = files.load(_SCHEMA_PATH, text)
    return ProtobufSchema(proto, files)
