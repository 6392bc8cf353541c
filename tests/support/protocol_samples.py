"""Populated sample values for protocol messages, for round-trip tests.

``sample(message, version)`` builds a value in which every field that exists in ``version``
(regular or tagged) holds a non-default value, and every field that does not exist holds the value
decoding yields for it (the field's default) -- so ``roundtrip(message, version, sample(...))``
must equal the sample. ``sample(message, version, nulls=True)`` puts null in every field that is
nullable in that version (regular fields only: a null tagged field is simply not sent).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import uuid
import zlib
from typing import Any

from riverlog.protocol.schema import (
    BOOL,
    BYTES,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    MAX_VERSION,
    RECORDS,
    STRING,
    UINT16,
    UINT32,
    UUID,
    Array,
    Field,
    FieldType,
    Message,
    Struct,
    _in,
)

__all__ = [
    "sample",
    "roundtrip",
    "normalize",
    "present_fields",
    "spec_json",
    "spec_versions",
    "spec_differences",
    "present_only",
    "kafka_python_build",
    "kafka_python_values",
    "positional",
    "has_tagged_values",
    "legacy_classes",
    "legacy_version",
    "legacy_values",
    "legacy_normalize",
]


def _seed(path: str) -> int:
    # Distinct, stable values per field path, so swapped fields don't round-trip by accident.
    return zlib.crc32(path.encode()) & 0x7FFF_FFFF


def _scalar(t: FieldType, path: str) -> Any:
    s = _seed(path)
    if t is INT8:
        return s % 100 + 1
    if t is INT16:
        return s % 30000 + 1
    if t is UINT16:
        return s % 60000 + 1
    if t is INT32:
        return s % 2_000_000_000 + 1
    if t is UINT32:
        return s % 4_000_000_000 + 1
    if t is INT64:
        return s * 1_000_003 + 1
    if t is FLOAT64:
        return s / 7.0 + 0.5
    if t is BOOL:
        return True
    if t is UUID:
        return uuid.UUID(int=(s << 64) | s | 1)
    if t is STRING:
        return f"{path.rsplit('.', 1)[-1]}-{s % 1000}"
    if t is BYTES:
        return f"bytes:{path}".encode()
    if t is RECORDS:
        return f"records:{path}".encode() * 3
    raise TypeError(f"no sample for field type {t!r} at {path}")


def present_fields(struct: Struct, version: int, flexible: bool) -> list[Field]:
    """Fields that exist on the wire in ``version`` (regular or tagged)."""
    out = []
    for fld in struct.fields:
        if fld.tag is not None:
            if flexible and _in(fld.tagged_versions, version):
                out.append(fld)
        elif _in(fld.versions, version):
            out.append(fld)
    return out


def _value(t: FieldType, path: str, version: int, flexible: bool, nulls: bool) -> Any:
    if isinstance(t, Struct):
        return _struct(t, path, version, flexible, nulls)
    if isinstance(t, Array):
        return [_value(t.item, f"{path}[{i}]", version, flexible, nulls) for i in range(2)]
    return _scalar(t, path)


def _struct(struct: Struct, path: str, version: int, flexible: bool, nulls: bool) -> dict[str, Any]:
    present = {id(fld) for fld in present_fields(struct, version, flexible)}
    out: dict[str, Any] = {}
    for fld in struct.fields:
        sub = f"{path}.{fld.name}"
        if id(fld) not in present:
            out[fld.name] = fld.default_value()
        elif nulls and fld.tag is None and _in(fld.nullable, version):
            out[fld.name] = None
        else:
            out[fld.name] = _value(fld.type, sub, version, flexible, nulls)
    return out


def sample(message: Message, version: int, *, nulls: bool = False) -> dict[str, Any]:
    """A fully-populated value of ``message`` at ``version``."""
    if not message.supports(version):
        raise ValueError(f"{message.name} has no version {version}")
    return _struct(message.body, message.name, version, message.is_flexible(version), nulls)


def normalize(value: Any) -> Any:
    """Decoded values with memoryviews turned into bytes, for comparisons and printing."""
    if isinstance(value, memoryview):
        return value.tobytes()
    if isinstance(value, dict):
        return {k: normalize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalize(v) for v in value]
    return value


def roundtrip(message: Message, version: int, value: dict[str, Any]) -> dict[str, Any]:
    """Encode ``value`` at ``version``, decode it back (checking nothing is left over)."""
    from riverlog.protocol.primitives import Reader

    data = message.encode(value, version)
    r = Reader(data)
    decoded = message.decode(r, version)
    if r.remaining():
        raise AssertionError(f"{message.name} v{version}: {r.remaining()} bytes left after decoding")
    result: dict[str, Any] = normalize(decoded)
    return result


# --- Cross-checks shared by the protocol test modules ------------------------------------------
#
# Kafka's own message JSON (as vendored by kafka-python 3.0.12), kafka-python's JSON-driven codec,
# and the hand-written legacy classes of aiokafka 0.14 and kafka-python (``kafka.protocol.old``),
# an implementation independent of the JSON. Imports of those packages happen lazily so that
# only the tests that use them need them.


def spec_json(message: Message) -> dict[str, Any]:
    """Kafka's message JSON for ``message`` as kafka-python vendors it (comments stripped); for
    the messages it does not vendor (the KIP-932 share-group APIs), the JSON inside the
    kafka-clients jar of the Kafka release the tests compare with."""
    from kafka.protocol.schemas.load_json import load_json

    try:
        spec: dict[str, Any] = load_json(message.name)
    except FileNotFoundError:
        spec = kafka_clients_spec_json(message.name)
    return spec


def kafka_clients_spec_json(name: str) -> dict[str, Any]:
    """``common/message/<name>.json`` from Kafka's kafka-clients jar (installed from Maven into the
    test cache like the Kafka target's broker), comments stripped."""
    import json
    import zipfile

    from support.brokers import kafka_dist

    libs = kafka_dist.install()
    jar = libs / f"kafka-clients-{kafka_dist.kafka_version()}.jar"
    with zipfile.ZipFile(jar) as zf:
        text = zf.read(f"common/message/{name}.json").decode()
    loaded: dict[str, Any] = json.loads(re.sub(r"(?m)^\s*//.*$", "", text))
    # As kafka-python's loader does: a field typed by a common struct gets that struct's fields.
    common = {c["name"]: c["fields"] for c in loaded.get("commonStructs", [])}

    def resolve(fields: list[dict[str, Any]]) -> None:
        for fld in fields:
            name = fld["type"].removeprefix("[]")
            if "fields" not in fld and name in common:
                fld["fields"] = common[name]
            resolve(fld.get("fields", []))

    resolve(loaded["fields"])
    return loaded


def spec_versions(text: str | None) -> tuple[int, int]:
    """A spec version string ("3+", "0-5", "2", "none") as a range; "none" is empty (1, 0)."""
    if text is None or text.strip() in ("", "none"):
        return (1, 0)
    text = text.strip()
    if text.endswith("+"):
        return (int(text[:-1]), MAX_VERSION)
    lo, _, hi = text.partition("-")
    return (int(lo), int(hi or lo))


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


_PRIMITIVE_NAMES = {
    id(INT8): "int8",
    id(INT16): "int16",
    id(UINT16): "uint16",
    id(INT32): "int32",
    id(UINT32): "uint32",
    id(INT64): "int64",
    id(FLOAT64): "float64",
    id(BOOL): "bool",
    id(UUID): "uuid",
    id(STRING): "string",
    id(BYTES): "bytes",
    id(RECORDS): "records",
}


def _spec_default(spec_field: dict[str, Any]) -> Any:
    """A field's default as Kafka's generator reads it (the type's zero when there is none)."""
    t = spec_field["type"]
    d = spec_field.get("default")
    if d == "null":
        return None
    if t.startswith("[]"):
        return []
    if "fields" in spec_field or t == "records":
        return None
    if t == "bool":
        return d in (True, "true")
    if t in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
        return 0 if d in (None, "") else int(d, 0) if isinstance(d, str) else int(d)
    if t == "float64":
        return float(d or 0)
    if t == "uuid":
        return uuid.UUID(int=0)
    if t == "string":
        return d or ""
    if t == "bytes":
        return b""
    raise AssertionError(f"unexpected spec type {t}")


def _spec_struct_fields(spec_field: dict[str, Any], common: dict[str, Any]) -> list[dict[str, Any]] | None:
    if "fields" in spec_field:
        return spec_field["fields"]
    name = spec_field["type"].removeprefix("[]")
    return common.get(name)


def _compare_struct(ours: Struct, spec_fields: list[dict[str, Any]], common: dict[str, Any], path: str) -> list[str]:
    names = [fld.name for fld in ours.fields]
    if names != [_snake(j["name"]) for j in spec_fields]:
        return [f"{path}: fields {names} != spec {[j['name'] for j in spec_fields]}"]
    out = []
    for fld, j in zip(ours.fields, spec_fields, strict=True):
        where = f"{path}.{fld.name}"
        if fld.versions != spec_versions(j.get("versions")):
            out.append(f"{where}: versions {fld.versions} != spec {j.get('versions')}")
        if fld.nullable != spec_versions(j.get("nullableVersions")):
            out.append(f"{where}: nullable {fld.nullable} != spec {j.get('nullableVersions')}")
        if fld.tag != j.get("tag"):
            out.append(f"{where}: tag {fld.tag} != spec {j.get('tag')}")
        if fld.tagged_versions != spec_versions(j.get("taggedVersions")):
            out.append(f"{where}: tagged {fld.tagged_versions} != spec {j.get('taggedVersions')}")
        out.extend(_compare_type(fld.type, j, common, where))
        ours_default = fld.default_value()
        if "fields" not in j:
            spec_default = _spec_default(j)
            if ours_default != spec_default or type(ours_default) is not type(spec_default):
                out.append(f"{where}: default {ours_default!r} != spec {spec_default!r}")
    return out


def _compare_type(t: FieldType, j: dict[str, Any], common: dict[str, Any], where: str) -> list[str]:
    spec_type: str = j["type"]
    sub = _spec_struct_fields(j, common)
    if isinstance(t, Array):
        if not spec_type.startswith("[]"):
            return [f"{where}: array where the spec has {spec_type}"]
        if isinstance(t.item, Struct):
            if sub is None:
                return [f"{where}: array of structs where the spec has {spec_type}"]
            return _compare_struct(t.item, sub, common, where + "[]")
        if sub is not None or _PRIMITIVE_NAMES.get(id(t.item)) != spec_type[2:]:
            return [f"{where}: item type {t.item!r} != spec {spec_type}"]
        return []
    if isinstance(t, Struct):
        if spec_type.startswith("[]") or sub is None:
            return [f"{where}: struct where the spec has {spec_type}"]
        return _compare_struct(t, sub, common, where)
    if _PRIMITIVE_NAMES.get(id(t)) != spec_type:
        return [f"{where}: type {t!r} != spec {spec_type}"]
    return []


def spec_differences(message: Message) -> list[str]:
    """How ``message``'s fields differ from Kafka's JSON: order, names (snake_case), types,
    versions, nullable versions, tags and defaults. Version ranges are for the caller to check."""
    spec = spec_json(message)
    common = {c["name"]: c["fields"] for c in spec.get("commonStructs", [])}
    out = []
    if spec["name"] != message.name:
        out.append(f"name {message.name} != spec {spec['name']}")
    if spec["apiKey"] != message.api_key:
        out.append(f"api key {message.api_key} != spec {spec['apiKey']}")
    if spec_versions(spec["flexibleVersions"]) != message.flexible:
        out.append(f"flexible {message.flexible} != spec {spec['flexibleVersions']}")
    out.extend(_compare_struct(message.body, spec["fields"], common, message.name))
    return out


def present_only(message: Message, version: int, value: dict[str, Any]) -> dict[str, Any]:
    """``value`` restricted to the fields on the wire in ``version``, as kafka-python's
    ``to_dict()`` gives them."""

    def struct(s: Struct, v: Any) -> Any:
        if v is None:
            return None
        out = {}
        for fld in present_fields(s, version, flexible):
            out[fld.name] = conv(fld.type, v[fld.name])
        return out

    def conv(t: FieldType, v: Any) -> Any:
        if isinstance(t, Struct):
            return struct(t, v)
        if isinstance(t, Array) and v is not None:
            return [conv(t.item, x) for x in v]
        return normalize(v)

    flexible = message.is_flexible(version)
    return struct(message.body, value)


def _kp_is_bitfield(fld: Any) -> bool:
    # kafka-python patches authorized-operations int32 fields into sets of bit numbers.
    return getattr(getattr(fld, "_type", None), "__name__", None) == "BitField"


def kafka_python_build(kp_cls: Any, version: int, value: dict[str, Any]) -> Any:
    """A kafka-python (JSON-driven) message object holding ``value``, built field by field."""

    def build(struct_field: Any, data_class: Any, val: dict[str, Any]) -> Any:
        kwargs = {}
        for name, fld in struct_field.fields.items():
            if not fld.for_version_q(version):
                continue
            v = val[name]
            if v is not None and fld.is_struct_array():
                v = [build(fld.array_of, fld.data_class, x) for x in v]
            elif v is not None and fld.is_struct():
                v = build(fld, fld.data_class, v)
            elif _kp_is_bitfield(fld):
                v = None if v == -(2**31) else {b for b in range(32) if (v & 0xFFFF_FFFF) >> b & 1}
            kwargs[name] = v
        return data_class(version=version, **kwargs)

    return build(kp_cls._struct, kp_cls, value)


def kafka_python_values(obj: Any) -> dict[str, Any]:
    """A decoded kafka-python message as our values: the fields of its version, bit sets back to
    int32s, memoryviews as bytes."""

    def conv(struct_field: Any, o: Any) -> Any:
        if o is None:
            return None
        out = {}
        for name, fld in struct_field.fields.items():
            if not fld.for_version_q(version):
                continue
            v = getattr(o, name)
            if v is not None and fld.is_struct_array():
                v = [conv(fld.array_of, x) for x in v]
            elif fld.is_struct():
                v = conv(fld, v)
            elif _kp_is_bitfield(fld):
                v = -(2**31) if v is None else sum(1 << b for b in v) - (2**32 if 31 in v else 0)
            out[name] = normalize(v)
        return out

    version = obj.version
    return conv(obj._struct, obj)


def positional(message: Message, version: int, value: dict[str, Any]) -> tuple[Any, ...]:
    """``value`` as the nested tuples the legacy classes take: regular fields in wire order, and
    an empty dict for each struct's tagged fields in flexible versions."""
    flexible = message.is_flexible(version)

    def struct(s: Struct, v: dict[str, Any]) -> tuple[Any, ...]:
        out: list[Any] = []
        for fld in s.fields:
            if fld.tag is not None or not _in(fld.versions, version):
                continue
            out.append(conv(fld.type, v[fld.name]))
        if flexible:
            out.append({})
        return tuple(out)

    def conv(t: FieldType, v: Any) -> Any:
        if v is None:
            return None
        if isinstance(t, Struct):
            return struct(t, v)
        if isinstance(t, Array):
            return [conv(t.item, x) for x in v]
        return v

    return struct(message.body, value)


def has_tagged_values(message: Message, version: int) -> bool:
    """Whether ``message`` has tagged fields in ``version`` (the legacy classes can't encode them)."""
    flexible = message.is_flexible(version)

    def walk(s: Struct) -> bool:
        for fld in present_fields(s, version, flexible):
            if fld.tag is not None:
                return True
            t = fld.type.item if isinstance(fld.type, Array) else fld.type
            if isinstance(t, Struct) and walk(t):
                return True
        return False

    return walk(message.body)


def legacy_classes() -> list[tuple[str, Any]]:
    """(dotted name, class) of every versioned request/response class of aiokafka's and
    kafka-python's hand-written protocol modules that are installed."""
    found = []
    for pkg_name in ("aiokafka.protocol", "kafka.protocol.old"):
        try:
            pkg = importlib.import_module(pkg_name)
        except ImportError:
            continue
        for info in pkgutil.iter_modules(pkg.__path__):
            mod = importlib.import_module(f"{pkg_name}.{info.name}")
            for name, cls in vars(mod).items():
                if (
                    isinstance(cls, type)
                    and cls.__module__ == mod.__name__
                    and isinstance(getattr(cls, "API_KEY", None), int)
                    and isinstance(getattr(cls, "API_VERSION", None), int)
                    and hasattr(cls, "SCHEMA")
                    and name.rsplit("_v", 1)[-1].isdigit()
                ):
                    found.append((f"{pkg_name}.{info.name}.{name}", cls))
    return found


def legacy_version(label: str) -> int:
    """The version a legacy class is for, from its name (some classes' API_VERSION is wrong,
    e.g. kafka-python's ListGroupsRequest_v2 says 1)."""
    return int(label.rsplit("_v", 1)[-1])


def _legacy_kind(t: Any) -> str:
    return (t if isinstance(t, type) else type(t)).__name__


def legacy_values(schema: Any, value: Any) -> Any:
    """A ``positional`` value adapted to a legacy schema's shapes. Wire-identical differences:
    a legacy schema may group consecutive fields of a struct into a nested schema (aiokafka's
    CreatePartitions ``new_partitions``); an array of one-field structs may be an array of the
    bare values; kafka-python's ``BitField`` takes a set of bit numbers (None for -2**31)."""
    if _legacy_kind(schema) == "Schema":
        items = iter(value)
        out = _legacy_schema(schema, items)
        rest = list(items)
        assert not rest, f"values left over for the legacy schema: {rest}"
        return out
    return _legacy_value(schema, value)


def _legacy_schema(schema: Any, items: Any) -> tuple[Any, ...]:
    out = []
    for t in schema.fields:
        if _legacy_kind(t) == "Schema":
            out.append(_legacy_schema(t, items))  # a group of our consecutive fields
        else:
            out.append(_legacy_value(t, next(items)))
    return tuple(out)


def _legacy_value(t: Any, value: Any) -> Any:
    kind = _legacy_kind(t)
    if kind in ("Array", "CompactArray"):
        if value is None:
            return None
        item = t.array_of
        if _legacy_kind(item) != "Schema":
            value = [x[0] if isinstance(x, tuple) and len(x) == 1 else x for x in value]
        return [legacy_values(item, x) for x in value]
    if kind == "BitField" and isinstance(value, int):
        if value == -(2**31):
            return None
        return {bit for bit in range(32) if (value & 0xFFFF_FFFF) >> bit & 1}
    return value


def legacy_normalize(value: Any) -> Any:
    """Values decoded by a legacy schema (or ``legacy_values``) in one comparable form: lists for
    tuples, no trailing empty tagged-field dicts, bytes for memoryviews."""
    if isinstance(value, tuple | list):
        items = list(value)
        if isinstance(value, tuple) and items and items[-1] == {}:
            items.pop()
        return [legacy_normalize(x) for x in items]
    return normalize(value)
