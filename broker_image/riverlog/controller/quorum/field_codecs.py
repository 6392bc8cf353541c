"""How a field of a Raft core message converts to and from its value in a KRaft RPC body.

A field's codec follows from its type hint (:func:`codec_for`): ``int`` as is; ``bool`` a flag;
``int | None`` a node id that may be unknown, None being Kafka's -1; ``ErrorCode`` an error code,
one the core does not know being a :class:`RemoteError`; ``OffsetAndEpoch`` Kafka's
``{end_offset, epoch}`` struct, and ``OffsetAndEpoch | None`` one that may be absent or (-1, -1),
Kafka's default; ``tuple[int, ...]`` an array; ``bytes`` bytes that may be null. A field whose
mapping is irregular gets its own codec from its table (a fetch's entries, ``entry_batches.py``).

Each codec names the ``kind`` of schema type it travels as, so ``wire_mapping.py`` can check every
table against its schema at import.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ...protocol.errors import ErrorCode
from ...protocol.schema import BOOL, BYTES, INT8, INT16, INT32, INT64, RECORDS, STRING, UUID, Array, Field, Struct
from ..raft.types import ErrorCode as RaftErrorCode
from ..raft.types import OffsetAndEpoch

Body = dict[str, Any]

NO_LEADER = -1  # Kafka's "no leader / unknown" for leader ids and epochs


class WireError(ValueError):
    """A received body that cannot become a core message."""


class RemoteError(WireError):
    """The peer answered with an error the core has no code for (or at the top level)."""

    def __init__(self, code: int, what: str) -> None:
        try:
            name = ErrorCode(code).name
        except ValueError:
            name = f"error {code}"
        super().__init__(f"{what}: {name}")
        self.code = code


class _Omit:
    def __repr__(self) -> str:
        return "OMIT"


# What ``FieldCodec.to_wire`` answers for a value that is not sent at all (the schema's default).
OMIT = _Omit()


class Decoding(NamedTuple):
    """What a codec may need while decoding one field."""

    api: str  # the RPC's name, for messages: "Fetch"
    wire_name: str  # the field's wire name, for messages: "diverging epoch"
    request: Any  # the request a response answers; None while decoding a request
    decoded: Mapping[str, Any]  # the message's fields decoded so far


class FieldCodec:
    """How one field's value converts. ``kind`` is the kind of schema type it travels as (see
    :func:`kind_of`); a path with an array step travels as an ``array``."""

    kind = "int"

    def to_wire(self, value: Any) -> Any:
        return value

    def from_wire(self, value: Any, decoding: Decoding) -> Any:
        return value


class _Flag(FieldCodec):
    kind = "bool"

    def from_wire(self, value: Any, decoding: Decoding) -> bool:
        return bool(value)


class _NodeId(FieldCodec):
    """A node id that may be unknown: None is Kafka's -1."""

    def to_wire(self, value: int | None) -> int:
        return NO_LEADER if value is None else value

    def from_wire(self, value: int, decoding: Decoding) -> int | None:
        return None if value < 0 else value


class _ErrorCode(FieldCodec):
    def to_wire(self, value: RaftErrorCode) -> int:
        return int(value)

    def from_wire(self, value: int, decoding: Decoding) -> RaftErrorCode:
        try:
            return RaftErrorCode(value)
        except ValueError:
            raise RemoteError(value, decoding.api) from None


class _OffsetAndEpoch(FieldCodec):
    """Kafka's snapshot id / diverging epoch struct. Where optional, absent or (-1, -1) (Kafka's
    default) means none."""

    kind = "struct"

    def __init__(self, optional: bool) -> None:
        self.optional = optional

    def to_wire(self, value: OffsetAndEpoch | None) -> Body | _Omit:
        if value is None:
            return OMIT
        return {"end_offset": value.offset, "epoch": value.epoch}

    def from_wire(self, value: Any, decoding: Decoding) -> OffsetAndEpoch | None:
        if not self.optional:
            return OffsetAndEpoch(value["end_offset"], value["epoch"])
        if value is None:
            return None
        offset, epoch = value["end_offset"], value["epoch"]
        if offset == -1 and epoch == -1:
            return None
        if offset < 0 or epoch < 0:
            raise WireError(f"{decoding.wire_name} ({offset}, {epoch}) is neither absent nor valid")
        return OffsetAndEpoch(offset, epoch)


class _IntArray(FieldCodec):
    kind = "array"

    def to_wire(self, value: tuple[int, ...]) -> list[int]:
        return list(value)

    def from_wire(self, value: Sequence[int], decoding: Decoding) -> tuple[int, ...]:
        return tuple(value)


class _Bytes(FieldCodec):
    kind = "bytes"

    def to_wire(self, value: bytes) -> bytes:
        return bytes(value)

    def from_wire(self, value: bytes | memoryview | None, decoding: Decoding) -> bytes:
        return bytes(value) if value is not None else b""


# The codec of a field by its type hint, unless its table gives one.
_CODECS_BY_TYPE: list[tuple[Any, FieldCodec]] = [
    (int, FieldCodec()),
    (bool, _Flag()),
    (int | None, _NodeId()),
    (RaftErrorCode, _ErrorCode()),
    (OffsetAndEpoch, _OffsetAndEpoch(optional=False)),
    (OffsetAndEpoch | None, _OffsetAndEpoch(optional=True)),
    (tuple[int, ...], _IntArray()),
    (bytes, _Bytes()),
]


def codec_for(message: type, name: str, hint: Any) -> FieldCodec:
    for type_, codec in _CODECS_BY_TYPE:
        if hint == type_:
            return codec
    raise TypeError(f"{message.__name__}.{name}: no codec for {hint}; its table must give one")


def kind_of(field: Field) -> str:
    """The kind of value a schema field carries, as codecs name them."""
    type_ = field.type
    if isinstance(type_, Struct):
        return "struct"
    if isinstance(type_, Array):
        return "array"
    if type_ in (INT8, INT16, INT32, INT64):
        return "int"
    if type_ is BOOL:
        return "bool"
    if type_ in (BYTES, RECORDS):
        return "bytes"
    if type_ is STRING:
        return "string"
    if type_ is UUID:
        return "uuid"
    return repr(type_)


__all__ = [
    "NO_LEADER",
    "OMIT",
    "Body",
    "Decoding",
    "FieldCodec",
    "RemoteError",
    "WireError",
    "codec_for",
    "kind_of",
]
