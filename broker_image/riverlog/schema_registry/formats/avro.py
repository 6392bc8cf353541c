"""Avro schemas for the registry: parsing, the canonical and normalized texts, and schema resolution.

What Confluent Schema Registry does for Avro is Apache Avro's Java library doing it, so this
module follows that library (1.12) rather than the letter of the spec wherever the two differ:

- parsing as ``org.apache.avro.Schema.Parser`` with default validation (Confluent validates
  defaults of new schemas): Unicode names, defaults checked against the field's type (a union's
  default may match any branch), identical enum/fixed redefinitions tolerated, forward references
  to named types resolved at the end of the document;
- :meth:`AvroSchema.canonical` prints what ``Schema.toString`` prints (Confluent's
  ``canonicalString``): attribute order type, name, namespace, doc, fields/symbols/items/values/
  size, default, properties, aliases; namespaces only where they change; named types spelled out
  at their first use and by name afterwards; types defined by references always by name;
- :meth:`AvroSchema.read_errors` is ``org.apache.avro.SchemaCompatibility`` (which Confluent's
  BACKWARD/FORWARD checks call), quirks included: names compare without namespaces, a writer
  union's branches are checked one by one, a reader union needs one readable branch.

Parsing is our own walk over the JSON: fastavro (the registry's Avro library for data) accepts
schemas the Java parser refuses (duplicate fields, bad names, negative fixed sizes, defaults of
the wrong type) and refuses some it accepts (invalid logical-type parameters, which Java keeps as
plain properties), and the registry must agree with the Java parser to be a drop-in replacement.
No I/O here: the registry hands over texts, this module hands back objects and strings.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from .base import Incompatibility, ParsedSchema, References, SchemaError

__all__ = ["AvroSchema", "parse_avro"]

PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
# Avro Java's Schema.Type names: a name equal to one of these is always written qualified.
_TYPE_NAMES = frozenset((*PRIMITIVES, "record", "enum", "array", "map", "union", "fixed"))
# Attributes that are part of a schema's definition; every other key is a custom property.
_SCHEMA_RESERVED = frozenset(("doc", "fields", "items", "name", "namespace", "size", "symbols", "values",
                              "type", "aliases"))
_ENUM_RESERVED = _SCHEMA_RESERVED | {"default"}
_FIELD_RESERVED = frozenset(("default", "doc", "name", "order", "type", "aliases"))
_ORDERS = ("ascending", "descending", "ignore")
_INT_RANGE = (-(2**31), 2**31 - 1)
_LONG_RANGE = (-(2**63), 2**63 - 1)
# What Java's Double.parseDouble takes from a string default of a float/double field.
_JAVA_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)[fFdD]?)")


# --- the schema model ---------------------------------------------------------------------------

class _Schema:
    """One Avro schema node. Named types are shared: every use of a name is the same object,
    which is what lets the compatibility check memoize pairs and stop on recursion."""

    type: str
    props: dict[str, Any]


@dataclass(eq=False)
class _Primitive(_Schema):
    type: str
    props: dict[str, Any] = field(default_factory=dict)


@dataclass(eq=False)
class _Named(_Schema):
    type: str  # "record", "error", "enum", "fixed"
    name: str  # short name
    space: str | None  # namespace, None for the null namespace
    doc: str | None = None
    aliases: list[tuple[str, str | None]] = field(default_factory=list)  # (short, space)
    props: dict[str, Any] = field(default_factory=dict)
    fields: list[_Field] = field(default_factory=list)
    symbols: list[str] = field(default_factory=list)
    enum_default: str | None = None
    size: int = 0

    @property
    def full(self) -> str:
        return f"{self.space}.{self.name}" if self.space else self.name

    def alias_fulls(self) -> list[str]:
        return [f"{space}.{name}" if space else name for name, space in self.aliases]


_NO_DEFAULT = object()


@dataclass(eq=False)
class _Field:
    name: str
    schema: _Schema
    pos: int
    doc: str | None = None
    default: Any = _NO_DEFAULT
    order: str = "ascending"
    aliases: list[str] = field(default_factory=list)
    props: dict[str, Any] = field(default_factory=dict)


@dataclass(eq=False)
class _Array(_Schema):
    items: _Schema
    props: dict[str, Any] = field(default_factory=dict)
    type: str = "array"


@dataclass(eq=False)
class _Map(_Schema):
    values: _Schema
    props: dict[str, Any] = field(default_factory=dict)
    type: str = "map"


@dataclass(eq=False)
class _Union(_Schema):
    branches: list[_Schema]
    props: dict[str, Any] = field(default_factory=dict)
    type: str = "union"


@dataclass(eq=False)
class _Unresolved(_Schema):
    """A use of a name not (yet) defined; replaced once the whole document is parsed, the way
    Avro 1.12 accepts references to types defined further down."""

    full: str
    props: dict[str, Any] = field(default_factory=dict)
    type: str = "unresolved"


def _type_word(schema: _Schema) -> str:
    # Avro Java's Schema.Type names as its messages print them.
    return "RECORD" if schema.type == "error" else schema.type.upper()


# --- JSON text as Avro Java (Jackson) writes it ----------------------------------------------------

def _java_double(value: float) -> str:
    """``Double.toString``: plain between 1e-3 and 1e7, else ``d.dddE±n``; shortest digits."""
    if math.isnan(value):
        return '"NaN"'  # Jackson quotes non-numeric numbers
    if math.isinf(value):
        return '"Infinity"' if value > 0 else '"-Infinity"'
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign, digits, exponent = Decimal(repr(value)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    assert isinstance(exponent, int)
    point = len(digits) + exponent  # position of the decimal point within ``text``
    prefix = "-" if sign else ""
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            return f"{prefix}0.{'0' * -point}{text}"
        whole, fraction = text[:point].ljust(point, "0"), text[point:]
        return f"{prefix}{whole}.{fraction or '0'}"
    return f"{prefix}{text[0]}.{text[1:] or '0'}E{point - 1}"


def _dump(value: Any) -> str:
    """Compact JSON as Jackson writes it: no spaces, non-ASCII as is, Java's doubles."""
    if isinstance(value, bool) or value is None or isinstance(value, int | str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, float):
        return _java_double(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{_dump(str(k))}:{_dump(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_dump(v) for v in value) + "]"
    raise TypeError(f"not JSON: {value!r}")


class _Raw(str):
    """Already-serialized JSON spliced into a larger document."""


def _emit(value: Any) -> str:
    if isinstance(value, _Raw):
        return str(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{_dump(str(k))}:{_emit(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_emit(v) for v in value) + "]"
    return _dump(value)


def _load_json(text: str) -> Any:
    def refuse(constant: str) -> Any:
        # Jackson's default refuses NaN/Infinity literals; Python's json takes them.
        raise ValueError(f"{constant} is not JSON")

    try:
        return json.loads(text, parse_constant=refuse)
    except (ValueError, RecursionError) as exc:
        raise SchemaError(f"Invalid schema: not JSON ({exc})") from None


# --- parsing ---------------------------------------------------------------------------------------

def _is_letter(ch: str) -> bool:
    return ch.isalpha()


def _is_digit(ch: str) -> bool:
    return unicodedata.category(ch) == "Nd"


def _validate_name(name: str, what: str) -> str:
    # Avro Java's default (UTF) name validator: a letter or '_' first, then letters, digits, '_'.
    if not name:
        raise SchemaError(f"Invalid schema: empty {what}")
    if not (_is_letter(name[0]) or name[0] == "_"):
        raise SchemaError(f"Invalid schema: illegal initial character in {what} {name!r}")
    for ch in name[1:]:
        if not (_is_letter(ch) or _is_digit(ch) or ch == "_"):
            raise SchemaError(f"Invalid schema: illegal character in {what} {name!r}")
    return name


def _make_name(name: str, space: str | None, what: str, *, alias: bool = False) -> tuple[str, str | None]:
    """(short name, namespace) as Avro Java's ``Schema.Name``: a dotted name carries its own
    namespace, an empty namespace is the null one, every part must be a valid name."""
    if "." in name:
        space, name = name.rsplit(".", 1)
    if space == "":
        space = None
    _validate_name(name, what)
    if space is not None:
        for part in space.split("."):
            _validate_name(part, f"namespace part of {what}")
    full = f"{space}.{name}" if space else name
    if full in PRIMITIVES and not alias:  # Avro Java checks type names only, not aliases
        raise SchemaError(f"Invalid schema: a {what} may not be named after a primitive type: {full!r}")
    return name, space


def _text(node: dict[str, Any], key: str) -> str | None:
    # Jackson's textValue(): only JSON strings count; a number or object there means "absent".
    value = node.get(key)
    return value if isinstance(value, str) else None


def _props(node: dict[str, Any], reserved: frozenset[str]) -> dict[str, Any]:
    return {key: value for key, value in node.items() if key not in reserved}


def _aliases(node: dict[str, Any], where: str) -> list[str]:
    value = node.get("aliases")
    if value is None:
        return []
    if not isinstance(value, list):
        raise SchemaError(f"Invalid schema: aliases of {where} are not an array")
    out: list[str] = []
    for alias in value:
        if not isinstance(alias, str):
            raise SchemaError(f"Invalid schema: alias {_dump(alias)} of {where} is not a string")
        if alias not in out:  # a set in Avro Java, in first-seen order
            out.append(alias)
    return out


class _Parser:
    """One ``Schema.Parser``: named types accumulate across the texts parsed with it (the
    references first, then the schema), as Confluent resolves Avro references."""

    def __init__(self) -> None:
        self.names: dict[str, _Named] = {}
        self._pending: list[_Unresolved] = []

    def parse_text(self, text: str) -> _Schema:
        root = self.parse(_load_json(text), None)
        return self._resolve(root)

    # Each parse_* returns a node; uses of names not defined yet become _Unresolved and are
    # swapped for the definitions by _resolve at the end of the text.
    def parse(self, node: Any, space: str | None) -> _Schema:
        if isinstance(node, str):
            return self._lookup(node, space)
        if isinstance(node, list):
            return self._union(node, space)
        if not isinstance(node, dict):
            raise SchemaError(f"Invalid schema: {_dump(node)} is not a schema (a name, an object or a union)")
        kind = node.get("type")
        if not isinstance(kind, str):
            raise SchemaError(f"Invalid schema: no \"type\" (a string) in {_dump(node)}")
        if kind in PRIMITIVES:
            return _Primitive(kind, _props(node, _SCHEMA_RESERVED))
        if kind in ("record", "error"):
            return self._record(node, space, kind)
        if kind == "enum":
            return self._enum(node, space)
        if kind == "fixed":
            return self._fixed(node, space)
        if kind == "array":
            if "items" not in node:
                raise SchemaError(f"Invalid schema: array without \"items\": {_dump(node)}")
            return _Array(self.parse(node["items"], space), _props(node, _SCHEMA_RESERVED))
        if kind == "map":
            if "values" not in node:
                raise SchemaError(f"Invalid schema: map without \"values\": {_dump(node)}")
            return _Map(self.parse(node["values"], space), _props(node, _SCHEMA_RESERVED))
        raise SchemaError(f"Invalid schema: unknown type {kind!r}; a \"type\" must be a primitive type or one "
                          "of \"record\", \"error\", \"enum\", \"fixed\", \"array\", \"map\"")

    def _lookup(self, name: str, space: str | None) -> _Schema:
        if name in PRIMITIVES:
            return _Primitive(name)
        full = f"{space}.{name}" if space and "." not in name else name
        # Avro Java tries the name in the enclosing namespace first, then as written.
        found = self.names.get(full) or self.names.get(name)
        if found is not None:
            return found
        unresolved = _Unresolved(full)
        self._pending.append(unresolved)
        return unresolved

    def _define(self, schema: _Named) -> _Named:
        """Register a named type; the registered one is what uses of the name get."""
        existing = self.names.get(schema.full)
        if existing is None:
            self.names[schema.full] = schema
            return schema
        # Avro Java tolerates a second definition equal to the first (its Schema.equals:
        # docs and aliases aside) and keeps the first.
        if _equality_key(existing) != _equality_key(schema):
            raise SchemaError(f"Invalid schema: can't redefine {schema.full!r}")
        return existing

    def _named(self, node: dict[str, Any], space: str | None, kind: str) -> _Named:
        raw_name = _text(node, "name")
        if raw_name is None:
            raise SchemaError(f"Invalid schema: no \"name\" (a string) in {kind} {_dump(node)}")
        declared = _text(node, "namespace")
        name, own_space = _make_name(raw_name, declared if declared is not None else space, f"{kind} name")
        schema = _Named(kind, name, own_space, doc=_text(node, "doc"))
        for alias in _aliases(node, f"{kind} {schema.full}"):
            schema.aliases.append(_make_name(alias, own_space, f"alias of {schema.full}", alias=True))
        return schema

    def _record(self, node: dict[str, Any], space: str | None, kind: str) -> _Named:
        schema = self._named(node, space, kind)
        fields = node.get("fields")
        if not isinstance(fields, list):
            raise SchemaError(f"Invalid schema: record {schema.full} has no \"fields\" array")
        # Registered before its fields, which may refer to the record itself; unless the name is
        # taken, then the fields are parsed first and the two definitions compared.
        redefinition = schema.full in self.names
        if not redefinition:
            self._define(schema)
        seen: set[str] = set()
        for pos, field_node in enumerate(fields):
            parsed = self._field(field_node, schema, pos)
            if parsed.name in seen:
                raise SchemaError(f"Invalid schema: duplicate field {parsed.name!r} in record {schema.full}")
            seen.add(parsed.name)
            schema.fields.append(parsed)
        schema.props = _props(node, _SCHEMA_RESERVED)
        return self._define(schema) if redefinition else schema

    def _field(self, node: Any, record: _Named, pos: int) -> _Field:
        if not isinstance(node, dict) or not isinstance(node.get("name"), str):
            raise SchemaError(f"Invalid schema: a field of {record.full} has no \"name\" (a string): {_dump(node)}")
        name = _validate_name(node["name"], f"field name in {record.full}")
        where = f"field {name!r} of {record.full}"
        if "type" not in node:
            raise SchemaError(f"Invalid schema: {where} has no \"type\"")
        schema = self.parse(node["type"], record.space)
        order = node.get("order", "ascending")
        if not isinstance(order, str) or order.lower() not in _ORDERS:
            raise SchemaError(f"Invalid schema: {where} has order {_dump(order)}; one of {', '.join(_ORDERS)}")
        parsed = _Field(name, schema, pos, doc=_text(node, "doc"), order=order.lower(),
                        aliases=_aliases(node, where), props=_props(node, _FIELD_RESERVED))
        if "default" in node:
            default = node["default"]
            if schema.type in ("float", "double") and isinstance(default, str):
                # Avro Java turns a string default of a float/double field into the number.
                if not _JAVA_DOUBLE.fullmatch(default.strip()):
                    raise SchemaError(f"Invalid default for {where}: {_dump(default)} is not a number")
                default = float(default.strip().rstrip("fFdD"))
            if not _valid_default(schema, default):
                raise SchemaError(f"Invalid default for {where}: {_dump(default)} is not a {_describe(schema)}")
            parsed.default = default
        return parsed

    def _enum(self, node: dict[str, Any], space: str | None) -> _Named:
        schema = self._named(node, space, "enum")
        symbols = node.get("symbols")
        if not isinstance(symbols, list):
            raise SchemaError(f"Invalid schema: enum {schema.full} has no \"symbols\" array")
        for symbol in symbols:
            if not isinstance(symbol, str):
                raise SchemaError(f"Invalid schema: enum symbol {_dump(symbol)} of {schema.full} is not a string")
            _validate_name(symbol, f"enum symbol of {schema.full}")
            if symbol in schema.symbols:
                raise SchemaError(f"Invalid schema: duplicate enum symbol {symbol!r} in {schema.full}")
            schema.symbols.append(symbol)
        default = _text(node, "default")
        if default is not None and default not in schema.symbols:
            raise SchemaError(f"Invalid schema: the default {default!r} of enum {schema.full} is not one of its "
                              f"symbols {schema.symbols}")
        schema.enum_default = default
        schema.props = _props(node, _ENUM_RESERVED)
        return self._define(schema)

    def _fixed(self, node: dict[str, Any], space: str | None) -> _Named:
        schema = self._named(node, space, "fixed")
        size = node.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or not _INT_RANGE[0] <= size <= _INT_RANGE[1]:
            raise SchemaError(f"Invalid schema: fixed {schema.full} has no \"size\" (an int)")
        if size < 0:
            raise SchemaError(f"Invalid schema: fixed {schema.full} has a negative size {size}")
        schema.size = size
        schema.props = _props(node, _SCHEMA_RESERVED)
        return self._define(schema)

    def _union(self, node: list[Any], space: str | None) -> _Union:
        branches = [self.parse(branch, space) for branch in node]
        seen: set[str] = set()
        for branch in branches:
            if isinstance(branch, _Union):
                raise SchemaError(f"Invalid schema: a union may not contain a union: {_dump(node)}")
            # Unnamed types may appear once each; named types once per name.
            key = branch.full if isinstance(branch, _Named | _Unresolved) else branch.type
            if key in seen:
                raise SchemaError(f"Invalid schema: duplicate {key!r} in union {_dump(node)}")
            seen.add(key)
        return _Union(branches)

    def _resolve(self, root: _Schema) -> _Schema:
        pending, self._pending = self._pending, []
        for unresolved in pending:
            if unresolved.full not in self.names:
                raise SchemaError(f"Invalid schema: undefined name {unresolved.full!r}")
        if not pending:
            return root

        def swap(schema: _Schema) -> _Schema:
            return self.names[schema.full] if isinstance(schema, _Unresolved) else schema

        for schema in _walk(swap(root)):
            if isinstance(schema, _Named):
                for f in schema.fields:
                    f.schema = swap(f.schema)
            elif isinstance(schema, _Array):
                schema.items = swap(schema.items)
            elif isinstance(schema, _Map):
                schema.values = swap(schema.values)
            elif isinstance(schema, _Union):
                schema.branches = [swap(b) for b in schema.branches]
        return swap(root)


def _walk(root: _Schema) -> Iterator[_Schema]:
    """Every node reachable from ``root``, each named type once (schemas may be recursive)."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        schema = stack.pop()
        if id(schema) in seen:
            continue
        seen.add(id(schema))
        yield schema
        if isinstance(schema, _Named):
            stack.extend(f.schema for f in schema.fields)
        elif isinstance(schema, _Array):
            stack.append(schema.items)
        elif isinstance(schema, _Map):
            stack.append(schema.values)
        elif isinstance(schema, _Union):
            stack.extend(schema.branches)


def _equality_key(schema: _Schema, inside: frozenset[str] = frozenset()) -> Any:
    """What Avro Java's Schema.equals compares: structure, names, defaults, order and
    properties, not docs, aliases or an enum's default."""
    if isinstance(schema, _Named | _Unresolved) and schema.full in inside:
        return schema.full
    if isinstance(schema, _Unresolved):
        return ["unresolved", schema.full]
    props = _dump(schema.props)
    if isinstance(schema, _Named):
        inner = inside | {schema.full}
        fields = [[f.name, _equality_key(f.schema, inner), _dump(f.default) if f.default is not _NO_DEFAULT else None,
                   f.order, _dump(f.props)] for f in schema.fields]
        return [schema.type, schema.full, schema.symbols, schema.size, fields, props]
    if isinstance(schema, _Array):
        return ["array", _equality_key(schema.items, inside), props]
    if isinstance(schema, _Map):
        return ["map", _equality_key(schema.values, inside), props]
    if isinstance(schema, _Union):
        return ["union", [_equality_key(b, inside) for b in schema.branches]]
    return [schema.type, props]


def _describe(schema: _Schema) -> str:
    return schema.full if isinstance(schema, _Named | _Unresolved) else schema.type


def _valid_default(schema: _Schema, value: Any) -> bool:
    """Avro Java's ``Schema.isValidDefault``. A name still unresolved stands for an empty
    record there, as in Avro Java (whose placeholder for a forward reference is one)."""
    kind = schema.type
    if kind in ("string", "bytes", "enum", "fixed"):
        return isinstance(value, str)
    if kind in ("int", "long"):
        low, high = _INT_RANGE if kind == "int" else _LONG_RANGE
        return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
    if kind in ("float", "double"):
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if isinstance(schema, _Array):
        return isinstance(value, list) and all(_valid_default(schema.items, v) for v in value)
    if isinstance(schema, _Map):
        return isinstance(value, dict) and all(_valid_default(schema.values, v) for v in value.values())
    if isinstance(schema, _Union):
        return any(_valid_default(branch, value) for branch in schema.branches)
    if isinstance(schema, _Unresolved):
        return isinstance(value, dict)
    if isinstance(schema, _Named):  # record, error
        if not isinstance(value, dict):
            return False
        for f in schema.fields:
            member = value.get(f.name, f.default)
            if member is _NO_DEFAULT or not _valid_value(f.schema, member):
                return False
        return True
    return False


def _valid_value(schema: _Schema, value: Any) -> bool:
    if isinstance(schema, _Union):
        return any(_valid_default(branch, value) for branch in schema.branches)
    return _valid_default(schema, value)


# --- the canonical text (Avro Java's Schema.toString) -------------------------------------------

def _qualified(name: str, space: str | None, current: str | None) -> str:
    if space is None:
        return name
    if space == current and name not in _TYPE_NAMES:
        return name
    return f"{space}.{name}"


def _canonical(schema: _Schema, known: set[str], space: str | None) -> Any:
    if isinstance(schema, _Primitive):
        return {"type": schema.type, **schema.props} if schema.props else schema.type
    if isinstance(schema, _Union):
        return [_canonical(b, known, space) for b in schema.branches]
    if isinstance(schema, _Array):
        return {"type": "array", "items": _canonical(schema.items, known, space), **schema.props}
    if isinstance(schema, _Map):
        return {"type": "map", "values": _canonical(schema.values, known, space), **schema.props}
    assert isinstance(schema, _Named)
    if schema.full in known:
        return _qualified(schema.name, schema.space, space)
    known.add(schema.full)
    out: dict[str, Any] = {"type": schema.type, "name": schema.name}
    if schema.space is not None:
        if schema.space != space:
            out["namespace"] = schema.space
    elif space is not None:
        out["namespace"] = ""  # back to the null namespace from within another
    if schema.doc is not None:
        out["doc"] = schema.doc
    if schema.type in ("record", "error"):
        out["fields"] = [_canonical_field(f, known, schema.space) for f in schema.fields]
    elif schema.type == "enum":
        out["symbols"] = list(schema.symbols)
        if schema.enum_default is not None:
            out["default"] = schema.enum_default
    else:
        out["size"] = schema.size
    out.update(schema.props)
    if schema.aliases:
        out["aliases"] = [_qualified(name, space_, schema.space) for name, space_ in schema.aliases]
    return out


def _canonical_field(f: _Field, known: set[str], space: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": f.name, "type": _canonical(f.schema, known, space)}
    if f.doc is not None:
        out["doc"] = f.doc
    if f.default is not _NO_DEFAULT:
        out["default"] = f.default
    if f.order != "ascending":
        out["order"] = f.order
    if f.aliases:
        out["aliases"] = list(f.aliases)
    out.update(f.props)
    return out


# --- the normalized text (normalize=true) ------------------------------------------------------

def _sorted_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted_json(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted_json(v) for v in value]
    return value


def _normal_default(schema: _Schema, value: Any) -> Any:
    """A default in one spelling per meaning: 1 and 1.0 for a double are the same default."""
    kind = schema.type
    if kind in ("float", "double"):
        return float(value)
    if isinstance(schema, _Array):
        return [_normal_default(schema.items, v) for v in value]
    if isinstance(schema, _Map):
        return {k: _normal_default(schema.values, value[k]) for k in sorted(value)}
    if isinstance(schema, _Union):
        for branch in schema.branches:
            if _valid_default(branch, value):
                return _normal_default(branch, value)
        return value
    if isinstance(schema, _Named) and schema.type in ("record", "error"):
        return {f.name: _normal_default(f.schema, value[f.name]) for f in schema.fields if f.name in value}
    return value


def _normalized(schema: _Schema, known: set[str]) -> Any:
    # Confluent's AvroSchemaUtils.toNormalizedString in spirit: Parsing Canonical Form's full
    # names and fixed attribute order, keeping what changes meaning for a registry (docs,
    # aliases, defaults, order, logical types and other properties), with sets sorted.
    if isinstance(schema, _Primitive):
        return {"type": schema.type, **_sorted_json(schema.props)} if schema.props else schema.type
    if isinstance(schema, _Union):
        return [_normalized(b, known) for b in schema.branches]
    if isinstance(schema, _Array):
        return {"type": "array", "items": _normalized(schema.items, known), **_sorted_json(schema.props)}
    if isinstance(schema, _Map):
        return {"type": "map", "values": _normalized(schema.values, known), **_sorted_json(schema.props)}
    assert isinstance(schema, _Named)
    if schema.full in known:
        return schema.full
    known.add(schema.full)
    out: dict[str, Any] = {"name": schema.full, "type": schema.type}
    if schema.type in ("record", "error"):
        out["fields"] = [_normalized_field(f, known) for f in schema.fields]
    elif schema.type == "enum":
        out["symbols"] = list(schema.symbols)
    else:
        out["size"] = schema.size
    if schema.doc:
        out["doc"] = schema.doc
    if schema.aliases:
        out["aliases"] = sorted(schema.alias_fulls())
    if schema.enum_default is not None:
        out["default"] = schema.enum_default
    out.update(_sorted_json(schema.props))
    return out


def _normalized_field(f: _Field, known: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": f.name, "type": _normalized(f.schema, known)}
    if f.order != "ascending":
        out["order"] = f.order
    if f.doc is not None:
        out["doc"] = f.doc
    if f.aliases:
        out["aliases"] = sorted(f.aliases)
    if f.default is not _NO_DEFAULT:
        out["default"] = _sorted_json(_normal_default(f.schema, f.default))
    out.update(_sorted_json(f.props))
    return out


# --- schema resolution (org.apache.avro.SchemaCompatibility) ----------------------------------

_Found = list[Incompatibility]
_IN_PROGRESS: _Found = []  # a marker (compared by identity): this pair is being checked


def _pointer(location: Sequence[str]) -> str:
    # A JSON pointer, the root token left out, as Avro Java's Incompatibility.getLocation.
    return "/" + "/".join(token.replace("~", "~0").replace("/", "~1") for token in location[1:])


def _name_matches(reader: _Named, writer: _Named) -> bool:
    # Avro Java compares the short names (a moved namespace reads fine), then the reader's
    # aliases against the writer's full name.
    return reader.name == writer.name or writer.full in reader.alias_fulls()


class _Checker:
    """One reader/writer check. Pairs are memoized by identity and a pair met again while it
    is being checked counts as compatible, which is how recursive types end."""

    def __init__(self) -> None:
        self._memo: dict[tuple[int, int], _Found] = {}

    def check(self, reader: _Schema, writer: _Schema) -> _Found:
        return self._check("", reader, writer, [])

    def _check(self, token: str, reader: _Schema, writer: _Schema, location: list[str]) -> _Found:
        location.append(token)
        key = (id(reader), id(writer))
        found = self._memo.get(key)
        if found is _IN_PROGRESS:
            found = []
        elif found is None:
            self._memo[key] = _IN_PROGRESS
            found = self._calculate(reader, writer, location)
            self._memo[key] = found
        location.pop()
        return found

    def _fresh(self, reader: _Schema, writer: _Schema) -> _Found:
        # Avro Java checks union branches with a new location stack (paths from the root).
        return self._check("", reader, writer, [])

    @staticmethod
    def _error(kind: str, message: str, location: list[str], token: str | None = None) -> _Found:
        # ``token``: the attribute at fault below the current location ("name", "size", ...).
        return [Incompatibility(kind, _pointer(location if token is None else [*location, token]), message)]

    def _type_mismatch(self, reader: _Schema, writer: _Schema, location: list[str]) -> _Found:
        return self._error("TYPE_MISMATCH", f"reader type: {_type_word(reader)} not compatible with writer type: "
                           f"{_type_word(writer)}", location)

    def _calculate(self, reader: _Schema, writer: _Schema, location: list[str]) -> _Found:
        r_kind = "record" if reader.type == "error" else reader.type
        w_kind = "record" if writer.type == "error" else writer.type
        if r_kind == w_kind:
            if isinstance(reader, _Primitive):
                return []
            if isinstance(reader, _Array) and isinstance(writer, _Array):
                return self._check("items", reader.items, writer.items, location)
            if isinstance(reader, _Map) and isinstance(writer, _Map):
                return self._check("values", reader.values, writer.values, location)
            if isinstance(reader, _Union) and isinstance(writer, _Union):
                found: _Found = []
                for index, branch in enumerate(writer.branches):
                    location.append(str(index))
                    if self._fresh(reader, branch):
                        found += self._error("MISSING_UNION_BRANCH",
                                             f"reader union lacking writer type: {_type_word(branch)}", location)
                    location.pop()
                return found
            assert isinstance(reader, _Named) and isinstance(writer, _Named)
            found = self._names(reader, writer, location)
            if r_kind == "fixed":
                return found + self._fixed_size(reader, writer, location)
            if r_kind == "enum":
                return found + self._enum_symbols(reader, writer, location)
            return found + self._fields(reader, writer, location)
        if isinstance(writer, _Union):
            found = []
            for index, branch in enumerate(writer.branches):
                found += self._check(str(index), reader, branch, location)
            return found
        if isinstance(reader, _Union):
            if any(not self._fresh(branch, writer) for branch in reader.branches):
                return []
            return self._error("MISSING_UNION_BRANCH", f"reader union lacking writer type: {_type_word(writer)}",
                               location)
        promotions = {"long": ("int",), "float": ("int", "long"), "double": ("int", "long", "float"),
                      "bytes": ("string",), "string": ("bytes",)}
        if w_kind in promotions.get(r_kind, ()):
            return []
        return self._type_mismatch(reader, writer, location)

    def _names(self, reader: _Named, writer: _Named, location: list[str]) -> _Found:
        if _name_matches(reader, writer):
            return []
        return self._error("NAME_MISMATCH", f"expected: {writer.full}", location, "name")

    def _fixed_size(self, reader: _Named, writer: _Named, location: list[str]) -> _Found:
        if reader.size == writer.size:
            return []
        return self._error("FIXED_SIZE_MISMATCH", f"expected: {writer.size}, found: {reader.size}", location, "size")

    def _enum_symbols(self, reader: _Named, writer: _Named, location: list[str]) -> _Found:
        missing = sorted(set(writer.symbols) - set(reader.symbols))
        # A reader enum with a default reads unknown symbols as the default.
        if not missing or (reader.enum_default is not None and reader.enum_default in reader.symbols):
            return []
        return self._error("MISSING_ENUM_SYMBOLS", f"[{', '.join(missing)}]", location, "symbols")

    def _fields(self, reader: _Named, writer: _Named, location: list[str]) -> _Found:
        found: _Found = []
        location.append("fields")
        by_name = {f.name: f for f in writer.fields}
        for reader_field in reader.fields:
            location.append(str(reader_field.pos))
            # The writer's field of the reader field's name or of one of its aliases (the
            # writer's own aliases play no part).
            matches = [by_name[n] for n in (reader_field.name, *reader_field.aliases) if n in by_name]
            if len(matches) > 1:
                # Avro Java throws here and Confluent reports the exception as incompatible.
                found += self._error("READER_FIELD_MATCHES_MULTIPLE_FIELDS", f"reader field {reader_field.name} "
                                     "matches several writer fields through its aliases", location)
            elif matches:
                found += self._check("type", reader_field.schema, matches[0].schema, location)
            elif reader_field.default is _NO_DEFAULT:
                enum = reader_field.schema
                if isinstance(enum, _Named) and enum.type == "enum" and enum.enum_default is not None:
                    # Avro Java's branch for an enum with a default: it compares the enum with
                    # the writer record itself, a type mismatch.
                    found += self._check("type", enum, writer, location)
                else:
                    found += self._error("READER_FIELD_MISSING_DEFAULT_VALUE", reader_field.name, location)
            location.pop()
        location.pop()
        return found


# --- the ParsedSchema ------------------------------------------------------------------------------

class AvroSchema(ParsedSchema):
    """A parsed Avro schema; build with :func:`parse_avro`."""

    schema_type = "AVRO"

    def __init__(self, root: _Schema, referenced: Sequence[str]) -> None:
        self._root = root
        # Full names of the referenced schemas: printed by name, never spelled out.
        self._referenced = tuple(referenced)
        self._canonical: str | None = None
        self._normalized: str | None = None

    def canonical(self) -> str:
        if self._canonical is None:
            self._canonical = _emit(_canonical(self._root, set(self._referenced), None))
        return self._canonical

    def normalized(self) -> str:
        if self._normalized is None:
            self._normalized = _emit(_normalized(self._root, set(self._referenced)))
        return self._normalized

    def read_errors(self, writer: ParsedSchema) -> list[Incompatibility]:
        if not isinstance(writer, AvroSchema):
            return [Incompatibility("TYPE_MISMATCH", "/", f"an Avro schema cannot read {writer.schema_type} data")]
        return _Checker().check(self._root, writer._root)

    @property
    def name(self) -> str | None:
        """The full name of a named top-level type (Confluent's record name strategies use it)."""
        return self._root.full if isinstance(self._root, _Named) else None


def parse_avro(text: str, references: References) -> AvroSchema:
    """Parse an Avro schema; the references' texts first, so the schema may use their named types.

    :class:`SchemaError` when ``text`` (or a reference) is not a valid Avro schema.
    """
    parser = _Parser()
    referenced: list[str] = []
    for ref_name, ref_text in references.items():
        try:
            ref_root = parser.parse_text(ref_text)
        except SchemaError as exc:
            raise SchemaError(f"Invalid reference {ref_name!r}: {exc}") from None
        if isinstance(ref_root, _Named):
            referenced.append(ref_root.full)
    return AvroSchema(parser.parse_text(text), referenced)
