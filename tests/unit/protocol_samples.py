"""Populated sample values for protocol messages, for round-trip tests.

``sample(message, version)`` builds a value in which every field that exists in ``version``
(regular or tagged) holds a non-default value, and every field that does not exist holds the value
decoding yields for it (the field's default) -- so ``roundtrip(message, version, sample(...))``
must equal the sample. ``sample(message, version, nulls=True)`` puts null in every field that is
nullable in that version (regular fields only: a null tagged field is simply not sent).
"""

from __future__ import annotations

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

__all__ = ["sample", "roundtrip", "normalize", "present_fields"]


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
    return normalize(decoded)  # type: ignore[no-any-return]
