"""The model of a parsed ``.proto`` file (issue #20): one file as declared, plus what linking
finds out (resolved types). Shared by the text parser and validator (``protobuf.py``) and the
descriptor codec (``protobuf_wire.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SCALARS = frozenset({"double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32",
                     "fixed64", "sfixed32", "sfixed64", "bool", "string", "bytes"})
# Map keys: any integral or string scalar (protobuf's rule: not floating point, bytes, enum or message).
MAP_KEY_TYPES = SCALARS - {"double", "float", "bytes"}
MAX_FIELD_NUMBER = 2 ** 29 - 1
# Reserved for the protobuf implementation itself; protoc refuses them.
IMPLEMENTATION_RESERVED = (19000, 19999)


# ---------------------------------------------------------------------------------------------
# The model: one .proto file as declared, plus what linking finds out (resolved types).
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Ident:
    """An unquoted option value: an enum constant (``SPEED``), ``inf``, ``nan``."""
    name: str


@dataclass(frozen=True)
class MsgLit:
    """An aggregate option value ``{ key: value ... }`` (text format)."""
    fields: tuple[tuple[str, Any], ...]


@dataclass
class Option:
    name: str  # as written, e.g. "java_package", "(confluent.field_meta).doc"
    value: Any  # str (unescaped), int, float, bool, Ident, MsgLit or a list of them


@dataclass
class Field:
    name: str
    number: int
    type: str  # as written: "int32", "Money", ".acme.Money"; a group's message name for groups
    label: str | None  # "optional", "required", "repeated"; None when not written (proto3, oneof, map)
    options: list[Option] = field(default_factory=list)
    oneof: str | None = None
    key_type: str | None = None  # map<key_type, type>
    group: Message | None = None  # proto2 groups: the inline message
    # Set by linking: "scalar", "enum", "message", "map" (then the value's kind is value_kind).
    kind: str = ""
    target: str = ""  # the scalar's name, or the fully qualified ".pkg.Type" of an enum or message
    value_kind: str = ""

    @property
    def is_map(self) -> bool:
        return self.key_type is not None


@dataclass
class OneOf:
    name: str
    options: list[Option] = field(default_factory=list)


@dataclass
class EnumValue:
    name: str
    number: int
    options: list[Option] = field(default_factory=list)


@dataclass
class Enum:
    name: str
    values: list[EnumValue] = field(default_factory=list)
    options: list[Option] = field(default_factory=list)
    reserved: list[tuple[int, int]] = field(default_factory=list)  # inclusive ranges
    reserved_names: list[str] = field(default_factory=list)
    full_name: str = ""


@dataclass
class Extend:
    extendee: str  # as written
    fields: list[Field] = field(default_factory=list)
    target: str = ""


@dataclass
class Message:
    name: str
    fields: list[Field] = field(default_factory=list)  # declaration order, oneof members included
    oneofs: list[OneOf] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    enums: list[Enum] = field(default_factory=list)
    reserved: list[tuple[int, int]] = field(default_factory=list)  # inclusive ranges
    reserved_names: list[str] = field(default_factory=list)
    extension_ranges: list[tuple[int, int]] = field(default_factory=list)  # inclusive ranges
    options: list[Option] = field(default_factory=list)
    extends: list[Extend] = field(default_factory=list)
    full_name: str = ""


@dataclass
class Method:
    name: str
    input_type: str
    output_type: str
    client_streaming: bool = False
    server_streaming: bool = False
    options: list[Option] = field(default_factory=list)
    input_target: str = ""
    output_target: str = ""


@dataclass
class Service:
    name: str
    methods: list[Method] = field(default_factory=list)
    options: list[Option] = field(default_factory=list)


@dataclass
class ProtoFile:
    path: str
    syntax: str | None = None  # as declared; None means proto2 unless an edition is declared
    edition: str | None = None
    package: str = ""
    imports: list[tuple[str, str]] = field(default_factory=list)  # (path, "" | "public" | "weak")
    options: list[Option] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    enums: list[Enum] = field(default_factory=list)
    extends: list[Extend] = field(default_factory=list)
    services: list[Service] = field(default_factory=list)

    @property
    def effective_syntax(self) -> str:
        return self.syntax or ("editions" if self.edition else "proto2")
