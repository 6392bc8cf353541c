"""A declarative description of Kafka messages, from which both decoding and encoding derive.

One ``Message`` per request or response type lists its fields with the versions they exist in,
the versions in which they may be null, and (for flexible versions) their tags. Decoded values are
plain dicts keyed by the field's snake_case name; when encoding, a missing key takes the field's
default, so handlers only fill in what they know.

Per version, a message is compiled once into a flat plan so decoding does no version arithmetic.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .file_region import FileRegion
from .primitives import ZERO_UUID, DecodeError, Reader, Writer

MAX_VERSION = 0x7FFF
# Limits that stop hostile length prefixes from allocating: an array can't have more elements
# than bytes left in the frame (every element is at least one byte).
VersionRange = tuple[int, int]
NO_VERSIONS: VersionRange = (1, 0)


def versions(spec: str | None) -> VersionRange:
    """Parse Kafka's version notation: "3+", "0-5", "2", or "none"."""
    if spec is None or spec == "none" or spec == "":
        return NO_VERSIONS
    if spec.endswith("+"):
        return (int(spec[:-1]), MAX_VERSION)
    if "-" in spec:
        lo, hi = spec.split("-")
        return (int(lo), int(hi))
    return (int(spec), int(spec))


def _in(r: VersionRange, v: int) -> bool:
    return r[0] <= v <= r[1]


class FieldType:
    """How one value is laid out on the wire. ``flexible`` selects compact encodings."""

    def decode(self, r: Reader, flexible: bool, version: int, nullable: bool) -> Any:
        raise NotImplementedError

    def encode(self, w: Writer, value: Any, flexible: bool, version: int, nullable: bool) -> None:
        raise NotImplementedError

    def default(self) -> Any:
        return None


@dataclass(frozen=True)
class _Fixed(FieldType):
    name: str
    reader: Callable[[Reader], Any]
    writer: Callable[[Writer, Any], None]
    zero: Any

    def decode(self, r: Reader, flexible: bool, version: int, nullable: bool) -> Any:
        return self.reader(r)

    def encode(self, w: Writer, value: Any, flexible: bool, version: int, nullable: bool) -> None:
        self.writer(w, self.zero if value is None else value)

    def default(self) -> Any:
        return self.zero


INT8 = _Fixed("int8", Reader.int8, Writer.int8, 0)
INT16 = _Fixed("int16", Reader.int16, Writer.int16, 0)
UINT16 = _Fixed("uint16", Reader.uint16, Writer.uint16, 0)
INT32 = _Fixed("int32", Reader.int32, Writer.int32, 0)
UINT32 = _Fixed("uint32", Reader.uint32, Writer.uint32, 0)
INT64 = _Fixed("int64", Reader.int64, Writer.int64, 0)
FLOAT64 = _Fixed("float64", Reader.float64, Writer.float64, 0.0)
BOOL = _Fixed("bool", Reader.boolean, Writer.boolean, False)
UUID = _Fixed("uuid", Reader.uuid, Writer.uuid, ZERO_UUID)


def _read_length(r: Reader, flexible: bool, wide: bool) -> int:
    """Length prefix of a string/bytes/array; -1 means null."""
    if flexible:
        return r.uvarint() - 1
    return r.int32() if wide else r.int16()


def _write_length(w: Writer, n: int, flexible: bool, wide: bool) -> None:
    if flexible:
        w.uvarint(n + 1)
    elif wide:
        w.int32(n)
    else:
        w.int16(n)


class _String(FieldType):
    def decode(self, r: Reader, flexible: bool, version: int, nullable: bool) -> Any:
        n = _read_length(r, flexible, wide=False)
        if n < 0:
            if n == -1 and nullable:
                return None
            raise DecodeError("null or negative-length string where none is allowed")
        return r.string(n)

    def encode(self, w: Writer, value: Any, flexible: bool, version: int, nullable: bool) -> None:
        if value is None:
            if not nullable:
                value = ""
            else:
                _write_length(w, -1, flexible, wide=False)
                return
        data = value.encode("utf-8")
        _write_length(w, len(data), flexible, wide=False)
        w.raw(data)

    def default(self) -> Any:
        return ""


class _Bytes(FieldType):
    def decode(self, r: Reader, flexible: bool, version: int, nullable: bool) -> Any:
        n = _read_length(r, flexible, wide=True)
        if n < 0:
            if n == -1 and nullable:
                return None
            raise DecodeError("null or negative-length bytes where none is allowed")
        return bytes(r.raw(n))

    def encode(self, w: Writer, value: Any, flexible: bool, version: int, nullable: bool) -> None:
        if value is None:
            if nullable:
                _write_length(w, -1, flexible, wide=True)
                return
            value = b""
        _write_length(w, len(value), flexible, wide=True)
        w.raw(value)

    def default(self) -> Any:
        return b""


class _Records(FieldType):
    """Record batches: decoded as a zero-copy memoryview; encoded from bytes or file regions.

    Encoding accepts ``None``, bytes-like, or a sequence of ``bytes | FileRegion``; file regions
    are spliced into the output so the server can ``sendfile`` them.
    """

    def decode(self, r: Reader, flexible: bool, version: int, nullable: bool) -> Any:
        n = _read_length(r, flexible, wide=True)
        if n < 0:
            return None
        return r.raw(n)

    def encode(self, w: Writer, value: Any, flexible: bool, version: int, nullable: bool) -> None:
        if value is None:
            _write_length(w, -1 if nullable else 0, flexible, wide=True)
            return
        if isinstance(value, bytes | bytearray | memoryview):
            _write_length(w, len(value), flexible, wide=True)
            w.raw(value)
            return
        total = sum(c.size if isinstance(c, FileRegion) else len(c) for c in value)
        _write_length(w, total, flexible, wide=True)
        for chunk in value:
            if isinstance(chunk, FileRegion):
                w.splice(chunk)
            else:
                w.raw(chunk)


STRING = _String()
BYTES = _Bytes()
RECORDS = _Records()


@dataclass(frozen=True)
class Array(FieldType):
    item: FieldType

    def decode(self, r: Reader, flexible: bool, version: int, nullable: bool) -> Any:
        n = _read_length(r, flexible, wide=True)
        if n < 0:
            if n == -1 and nullable:
                return None
            raise DecodeError("null or negative-length array where none is allowed")
        if n > r.remaining():
            raise DecodeError(f"array of {n} elements cannot fit in {r.remaining()} bytes")
        item = self.item
        return [item.decode(r, flexible, version, False) for _ in range(n)]

    def encode(self, w: Writer, value: Any, flexible: bool, version: int, nullable: bool) -> None:
        if value is None:
            _write_length(w, -1 if nullable else 0, flexible, wide=True)
            return
        _write_length(w, len(value), flexible, wide=True)
        item = self.item
        for element in value:
            item.encode(w, element, flexible, version, False)

    def default(self) -> Any:
        return []


class _NullDefault:
    """Type of ``NULL``, a single marker object (copies and pickles stay the same object)."""

    def __repr__(self) -> str:
        return "NULL"

    def __reduce__(self) -> str:
        return "NULL"


# ``f(..., default=NULL)`` is the spec's ``"default": "null"`` for a nullable field: its default
# (what decoding yields in versions where it is absent, and what encoding writes for a missing key)
# is None rather than the type's zero value ("" for strings, [] for arrays).
NULL = _NullDefault()


@dataclass(frozen=True)
class Field:
    name: str
    type: FieldType
    versions: VersionRange = (0, MAX_VERSION)
    nullable: VersionRange = NO_VERSIONS
    tag: int | None = None
    tagged_versions: VersionRange = NO_VERSIONS
    default: Any = None  # None means "the type's zero value"

    def default_value(self) -> Any:
        if self.default is NULL:
            return None
        if self.default is not None:
            return self.default
        if isinstance(self.type, Struct):
            return None
        return self.type.default()


def f(
    name: str,
    type_: FieldType,
    versions_: str = "0+",
    *,
    nullable: str | None = None,
    tag: int | None = None,
    tagged: str | None = None,
    default: Any = None,
) -> Field:
    """Shorthand used by the message modules: ``f("topics", Array(TOPIC), "0+")``.

    A tagged field gives ``tag`` and ``tagged`` (the versions in which it is tagged, usually the
    message's flexible versions); its ``versions_`` should cover the same range.
    """
    return Field(
        name,
        type_,
        versions(versions_),
        versions(nullable),
        tag,
        versions(tagged) if tag is not None else NO_VERSIONS,
        default,
    )


@dataclass
class _Plan:
    regular: list[tuple[str, FieldType, bool]]
    absent: list[tuple[str, Field]]
    tagged: dict[int, tuple[str, Field]]
    tagged_order: list[tuple[int, Field]]
    flexible: bool


@dataclass(frozen=True)
class Struct(FieldType):
    fields: Sequence[Field]
    # Per (version, flexible) compiled plans, filled lazily.
    _plans: dict[tuple[int, bool], _Plan] = field(default_factory=dict, compare=False, repr=False)

    def plan(self, version: int, flexible: bool) -> _Plan:
        key = (version, flexible)
        plan = self._plans.get(key)
        if plan is None:
            regular: list[tuple[str, FieldType, bool]] = []
            absent: list[tuple[str, Field]] = []
            tagged: dict[int, tuple[str, Field]] = {}
            for fld in self.fields:
                if fld.tag is not None and flexible and _in(fld.tagged_versions, version):
                    tagged[fld.tag] = (fld.name, fld)
                    absent.append((fld.name, fld))  # filled in if the tag is present
                elif _in(fld.versions, version) and fld.tag is None:
                    regular.append((fld.name, fld.type, _in(fld.nullable, version)))
                else:
                    absent.append((fld.name, fld))
            order = sorted(((t, fld) for t, (_, fld) in tagged.items()), key=lambda x: x[0])
            plan = _Plan(regular, absent, tagged, order, flexible)
            self._plans[key] = plan
        return plan

    def decode(self, r: Reader, flexible: bool, version: int, nullable: bool) -> Any:
        # Nullable structs are prefixed by an int8: -1 for null, 1 for present.
        if nullable and r.int8() < 0:
            return None
        plan = self.plan(version, flexible)
        out: dict[str, Any] = {}
        for name, fld in plan.absent:
            out[name] = fld.default_value()
        for name, ftype, fnullable in plan.regular:
            out[name] = ftype.decode(r, flexible, version, fnullable)
        if flexible:
            count = r.uvarint()
            if count > r.remaining():
                raise DecodeError("too many tagged fields")
            for _ in range(count):
                tag = r.uvarint()
                size = r.uvarint()
                known = plan.tagged.get(tag)
                if known is None:
                    r.raw(size)  # unknown tags are skipped, as the protocol requires
                    continue
                sub = Reader(r.buf, r.pos, r.pos + size)
                if sub.end > r.end:
                    raise DecodeError("tagged field runs past its container")
                name, fld = known
                out[name] = fld.type.decode(sub, flexible, version, _in(fld.nullable, version))
                r.pos += size
        return out

    def encode(self, w: Writer, value: Any, flexible: bool, version: int, nullable: bool) -> None:
        if nullable:
            if value is None:
                w.int8(-1)
                return
            w.int8(1)
        elif value is None:
            # A missing non-nullable struct (e.g. FetchSnapshot's SnapshotId) is written with its
            # fields' defaults, as Kafka's default instance of it would be.
            value = {}
        plan = self.plan(version, flexible)
        get = value.get
        for name, ftype, fnullable in plan.regular:
            v = get(name)
            if v is None and not fnullable:
                v = self._default_for(name)
            ftype.encode(w, v, flexible, version, fnullable)
        if flexible:
            present: list[tuple[int, Field, Any]] = []
            for tag, fld in plan.tagged_order:
                v = get(fld.name)
                if v is not None and v != fld.default_value():
                    present.append((tag, fld, v))
            w.uvarint(len(present))
            for tag, fld, v in present:
                sub = Writer()
                fld.type.encode(sub, v, flexible, version, _in(fld.nullable, version))
                w.uvarint(tag)
                w.uvarint(len(sub.buf))
                w.raw(sub.buf)

    def _default_for(self, name: str) -> Any:
        for fld in self.fields:
            if fld.name == name:
                return fld.default_value()
        return None

    def default(self) -> Any:
        return None


@dataclass(frozen=True)
class Message:
    """A request or response type: its API key, valid and flexible versions, and body."""

    name: str
    api_key: int
    valid: VersionRange
    flexible: VersionRange
    body: Struct

    def is_flexible(self, version: int) -> bool:
        return _in(self.flexible, version)

    def supports(self, version: int) -> bool:
        return _in(self.valid, version)

    def decode(self, buf: bytes | bytearray | memoryview | Reader, version: int) -> dict[str, Any]:
        r = buf if isinstance(buf, Reader) else Reader(buf)
        result: dict[str, Any] = self.body.decode(r, self.is_flexible(version), version, False)
        return result

    def encode_into(self, w: Writer, value: dict[str, Any], version: int) -> None:
        self.body.encode(w, value, self.is_flexible(version), version, False)

    def encode(self, value: dict[str, Any], version: int) -> bytes:
        w = Writer()
        self.encode_into(w, value, version)
        if w.splices:
            raise ValueError("message contains file regions: use encode_into and Writer.chunks()")
        return bytes(w.buf)


def message(
    name: str, api_key: int, valid: str, flexible: str, fields: Sequence[Field]
) -> Message:
    return Message(name, api_key, versions(valid), versions(flexible), Struct(list(fields)))


def new_uuid() -> uuid.UUID:
    return uuid.uuid4()
