"""Raft core messages <-> KRaft RPC bodies, driven by one field table per message.

A core message (``controller/raft/messages.py``) travels in the body of a Kafka RPC: the dict the
RPC's schema in ``protocol/messages`` encodes. Instead of a hand-written pair of functions per
message, each message has a table (``kraft_rpcs.py``) saying where each of its fields goes in the
body; everything else is derived:

* how a value converts, from the dataclass field's type hint (``field_codecs.py``), unless the
  table gives the field a codec of its own where the mapping is irregular (a fetch's entries as
  record batches, ``entry_batches.py``);
* where the metadata partition is, from the schema: the body's array of topic structs holding
  ``partitions``; the topic named by the struct's string fields and identified by its UUID fields;
  the partition index, the first field of every Kafka partition struct;
* which spelling of a field a version has (ReplicaId up to Fetch v14, ReplicaState.ReplicaId from
  v15): a field may be written in several places, and is read from the one the schema says the
  version has;
* a field no table names goes with its schema default (zero KIP-853 directory ids, no endpoints).

Tables are checked against their dataclass and schema at import: every dataclass field must be
described, every path must exist in the schema and carry a value of the field's kind.

A response also carries what Kafka's RPC lacks from the request it answers: its ``src``/``dst``
are the request's ``dst``/``src``, and fields marked :data:`ECHO` repeat the request's. A request
names its destination only where the RPC has a voter key; the receiver is the destination.
"""

from __future__ import annotations

import dataclasses
import typing
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...protocol.errors import ErrorCode
from ...protocol.schema import INT32, STRING, UUID, Array, Field, Struct
from ...protocol.schema import Message as Schema
from .field_codecs import OMIT, Body, Decoding, FieldCodec, RemoteError, WireError, codec_for, kind_of

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
# Kafka's fixed id of the metadata topic (Uuid.METADATA_TOPIC_ID), "AAAAAAAAAAAAAAAAAAAAAQ".
METADATA_TOPIC_ID = uuid.UUID(int=1)


# --- where a field goes ----------------------------------------------------------------------


@dataclass(frozen=True)
class Place:
    """Where one field of a core message travels in an RPC body.

    A path names nested struct fields with dots (``current_leader.leader_epoch``); ``name[]`` is an
    array of structs, one per element of the field's tuple (``preferred_candidates[].candidate_id``).
    """

    paths: tuple[str, ...]  # one, or one per spelling: written to all, read from the version's
    in_body: bool  # paths start at the body's top level, else at the metadata partition
    # A request with a negative value here is refused (INVALID_REQUEST), as Kafka's KRaft refuses
    # impossible ids, epochs and offsets before its Raft logic looks at them.
    non_negative: bool = False
    at_least: int | None = None  # a received value below this one is read as this one


def in_partition(*paths: str, non_negative: bool = False) -> Place:
    """A field of the metadata partition's struct."""
    return Place(paths, in_body=False, non_negative=non_negative)


def in_body(*paths: str, non_negative: bool = False, at_least: int | None = None) -> Place:
    """A field of the body's top level."""
    return Place(paths, in_body=True, non_negative=non_negative, at_least=at_least)


class _Echo:
    def __repr__(self) -> str:
        return "ECHO"


# A response field Kafka's RPC has no room for: the requester fills it from its request.
ECHO = _Echo()


# --- paths in a body -----------------------------------------------------------------------------


class _AbsentStruct(Exception):
    """A struct on a field's path is absent (a tagged struct not sent, or a null)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


@dataclass(frozen=True)
class _Path:
    segments: tuple[str, ...]
    fields: tuple[Field, ...]  # the schema fields along the path

    @classmethod
    def resolve(cls, struct: Struct, path: str, where: str) -> _Path:
        segments = tuple(path.split("."))
        fields: list[Field] = []
        current: Struct | None = struct
        for segment in segments:
            name = segment.removesuffix("[]")
            found = None if current is None else next((f for f in current.fields if f.name == name), None)
            if found is None:
                raise TypeError(f"{where}: the schema has no field {path!r}")
            fields.append(found)
            inner = found.type.item if isinstance(found.type, Array) and segment.endswith("[]") else found.type
            current = inner if isinstance(inner, Struct) else None
            if segment.endswith("[]") and current is None:
                raise TypeError(f"{where}: {name} in {path!r} is no array of structs")
        return cls(segments, tuple(fields))

    @property
    def kind(self) -> str:
        if any(s.endswith("[]") for s in self.segments):
            return "array"
        return kind_of(self.fields[-1])

    def exists_at(self, version: int) -> bool:
        return all(f.versions[0] <= version <= f.versions[1] for f in self.fields)

    def write(self, container: Body, value: Any) -> None:
        if len(self.segments) == 1:
            container[self.segments[0]] = value
        else:
            _write(container, self.segments, value)

    def read(self, container: Body) -> Any:
        """The value at this path; raises :class:`_AbsentStruct` if a struct on the way is None.
        (Decoding fills every field a version lacks with its default, so only structs can be.)"""
        if len(self.segments) == 1:
            return container[self.segments[0]]
        return _read(container, self.segments)


def _write(container: Body, segments: Sequence[str], value: Any) -> None:
    head, rest = segments[0], segments[1:]
    if not rest:
        container[head] = value
    elif head.endswith("[]"):
        items: list[Body] = []
        for element in value:
            item: Body = {}
            _write(item, rest, element)
            items.append(item)
        container[head[:-2]] = items
    else:
        _write(container.setdefault(head, {}), rest, value)


def _read(container: Any, segments: Sequence[str]) -> Any:
    for i, segment in enumerate(segments):
        if container is None:
            raise _AbsentStruct(segments[i - 1])
        if segment.endswith("[]"):
            return [_read(item, segments[i + 1:]) for item in container[segment[:-2]] or ()]
        container = container[segment]
    return container


# --- the metadata partition ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Layout:
    """Where an RPC's body holds the metadata partition, read from its schema."""

    topics: str  # the body's array of topics
    names: tuple[Field, ...]  # the topic struct's name fields (string)
    ids: tuple[Field, ...]  # ... and its id fields (UUID)
    index: str  # the partition struct's index field
    partition: Struct

    @classmethod
    def of(cls, body: Struct, where: str) -> _Layout:
        found = [(f, f.type.item) for f in body.fields
                 if isinstance(f.type, Array) and isinstance(f.type.item, Struct)
                 and any(p.name == "partitions" and isinstance(p.type, Array) and isinstance(p.type.item, Struct)
                         for p in f.type.item.fields)]
        if len(found) != 1:
            raise TypeError(f"{where}: expected one array of topics with partitions, found {len(found)}")
        topics, topic = found[0]
        partitions = next(p for p in topic.fields if p.name == "partitions")
        assert isinstance(partitions.type, Array) and isinstance(partitions.type.item, Struct)
        partition = partitions.type.item
        index = partition.fields[0]  # Kafka's partition structs begin with the partition index
        if index.type is not INT32:
            raise TypeError(f"{where}: the partition struct does not begin with its index")
        names = tuple(f for f in topic.fields if f.type is STRING)
        ids = tuple(f for f in topic.fields if f.type is UUID)
        if not names and not ids:
            raise TypeError(f"{where}: the topic struct has neither name nor id")
        return cls(topics.name, names, ids, index.name, partition)

    def body_with(self, partition: Body) -> Body:
        topic: Body = {f.name: METADATA_TOPIC for f in self.names}
        topic.update({f.name: METADATA_TOPIC_ID for f in self.ids})
        topic["partitions"] = [partition]
        return {self.topics: [topic]}

    def names_metadata(self, topic: Body, version: int | None) -> bool:
        """Whether ``topic`` is ``__cluster_metadata``: by every name or id field ``version`` has
        (topics go by name up to Fetch v12, by id from v13), or, version unknown, by any."""
        checks = [(f, topic.get(f.name) == METADATA_TOPIC) for f in self.names]
        checks += [(f, topic.get(f.name) == METADATA_TOPIC_ID) for f in self.ids]
        if version is None:
            return any(ok for _, ok in checks)
        return all(ok for f, ok in checks if f.versions[0] <= version <= f.versions[1])

    def only_partition(self, body: Body, version: int | None) -> Body | str:
        """The single metadata partition of ``body``, or why there is none."""
        topics = body[self.topics]
        if not topics or len(topics) != 1 or len(topics[0]["partitions"] or ()) != 1:
            return "expected exactly the metadata partition"
        partition: Body = topics[0]["partitions"][0]
        if not self.names_metadata(topics[0], version) or partition[self.index] != METADATA_PARTITION:
            return f"answers another partition than {METADATA_TOPIC}-{METADATA_PARTITION}"
        return partition


# --- one message's mapping ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Step:
    """One dataclass field: where it goes and how it converts."""

    name: str
    place: Place
    paths: tuple[_Path, ...]
    codec: FieldCodec
    wire_name: str  # for messages: "diverging epoch"

    def path_at(self, version: int) -> _Path:
        """The spelling ``version`` has (the first, if it has none: decoding gave the default)."""
        if len(self.paths) == 1:
            return self.paths[0]
        return next((p for p in self.paths if p.exists_at(version)), self.paths[0])


class _MessageMapping:
    """A core message type <-> the body of its Kafka RPC (see the module docstring)."""

    IMPLICIT: frozenset[str] = frozenset()  # fields that never come from a table

    def __init__(self, message: type, schema: Schema, fields: Mapping[str, Place | _Echo], *,
                 codecs: Mapping[str, FieldCodec] | None = None, body_constants: Mapping[str, Any] | None = None,
                 partition_constants: Mapping[str, Any] | None = None) -> None:
        where = f"{message.__name__} in {schema.name}"
        self.message = message
        self.schema = schema
        self.api = schema.name.removesuffix("Request").removesuffix("Response")
        self.layout = _Layout.of(schema.body, where)
        names = [f.name for f in dataclasses.fields(message)]
        undescribed = set(names) - set(fields) - self.IMPLICIT
        unknown = set(fields) - set(names)
        if undescribed or unknown:
            raise TypeError(f"{where}: undescribed fields {sorted(undescribed)}, unknown {sorted(unknown)}")
        hints = typing.get_type_hints(message)
        codecs = codecs or {}
        self.echoes = tuple(n for n in names if fields.get(n) is ECHO)
        self.steps: list[_Step] = []
        for name in names:
            place = fields.get(name)
            if not isinstance(place, Place):
                continue
            codec = codecs.get(name) or codec_for(message, name, hints[name])
            root = schema.body if place.in_body else self.layout.partition
            paths = tuple(_Path.resolve(root, p, where) for p in place.paths)
            for path in paths:
                if path.kind != codec.kind:
                    raise TypeError(f"{where}: {name} is a {codec.kind}, {'.'.join(path.segments)} a {path.kind}")
            self.steps.append(_Step(name, place, paths, codec, paths[0].segments[-1].replace("_", " ")))
        self.constants = [(_Path.resolve(schema.body, p, where), True, v) for p, v in (body_constants or {}).items()]
        self.constants += [(_Path.resolve(self.layout.partition, p, where), False, v)
                           for p, v in (partition_constants or {}).items()]

    def _to_wire(self, msg: Any) -> Body:
        partition: Body = {self.layout.index: METADATA_PARTITION}
        body = self.layout.body_with(partition)
        for path, at_body, value in self.constants:
            path.write(body if at_body else partition, value)
        for step in self.steps:
            value = step.codec.to_wire(getattr(msg, step.name))
            if value is OMIT:
                continue
            for path in step.paths:
                path.write(body if step.place.in_body else partition, value)
        return body


class RequestMapping(_MessageMapping):
    """A core request <-> a Kafka request body. ``dst`` is never read from the wire: the receiver
    is the destination; where the table places it (the voter key), it must name the receiver."""

    IMPLICIT = frozenset({"dst"})

    def to_wire(self, msg: Any, cluster_id: str) -> Body:
        body = self._to_wire(msg)
        body["cluster_id"] = cluster_id
        return body

    def from_wire(self, body: Body, version: int, *, local_id: int) -> Any:
        """The core request, or the error code Kafka's KRaft would refuse the body with: a wrong
        topic or partition, or impossible values, INVALID_REQUEST (Kafka's answer, until
        multi-raft); a voter key naming another node, INVALID_VOTER_KEY."""
        partition = self.layout.only_partition(body, version)
        if isinstance(partition, str):
            return ErrorCode.INVALID_REQUEST
        values: dict[str, Any] = {}
        voter_id: int | None = None
        for step in self.steps:
            try:
                raw = step.path_at(version).read(body if step.place.in_body else partition)
            except _AbsentStruct:
                return ErrorCode.INVALID_REQUEST
            value = step.codec.from_wire(raw, Decoding(self.api, step.wire_name, None, values))
            if step.place.at_least is not None:
                value = max(value, step.place.at_least)
            if step.place.non_negative and _negative(value):
                return ErrorCode.INVALID_REQUEST
            if step.name == "dst":
                voter_id = value
            else:
                values[step.name] = value
        # A version without the voter key reads it as -1: the request is for whoever received it.
        if voter_id is not None and voter_id >= 0 and voter_id != local_id:
            return ErrorCode.INVALID_VOTER_KEY
        return self.message(**values, dst=local_id)


def _negative(value: Any) -> bool:
    if isinstance(value, tuple):  # an OffsetAndEpoch
        return any(part < 0 for part in value)
    return bool(value < 0)


class ResponseMapping(_MessageMapping):
    """A core response <-> a Kafka response body. Received, a response takes ``src``/``dst`` and
    its :data:`ECHO` fields from the request it answers."""

    IMPLICIT = frozenset({"src", "dst"})

    def __init__(self, message: type, schema: Schema, fields: Mapping[str, Place | _Echo], **options: Any) -> None:
        super().__init__(message, schema, fields, **options)
        for step in self.steps:
            if len(step.paths) != 1:
                raise TypeError(f"{message.__name__}.{step.name}: a response is read without its version, "
                                "so a field has one place")
        # A refusal explains the rest of the answer (which may lack a leader or records): its
        # error code is decoded first, so that is what the requester hears about.
        self.steps.sort(key=lambda step: step.name != "error")

    def to_wire(self, msg: Any) -> Body:
        return self._to_wire(msg)

    def from_wire(self, body: Body, request: Any) -> Any:
        """The core response; raises :class:`WireError` when the body cannot be one."""
        code = body.get("error_code", 0)
        if code:
            raise RemoteError(code, self.api)
        partition = self.layout.only_partition(body, None)
        if isinstance(partition, str):
            raise WireError(f"{self.api}: {partition}")
        values: dict[str, Any] = {"src": request.dst, "dst": request.src}
        values.update({name: getattr(request, name) for name in self.echoes})
        for step in self.steps:
            try:
                raw = step.paths[0].read(body if step.place.in_body else partition)
            except _AbsentStruct as absent:
                what = absent.name.replace("_", " ")
                raise WireError(f"{self.api}: the response names no {what} ({step.name} unknown)") from None
            values[step.name] = step.codec.from_wire(raw, Decoding(self.api, step.wire_name, request, values))
        return self.message(**values)


__all__ = [
    "ECHO",
    "METADATA_PARTITION",
    "METADATA_TOPIC",
    "METADATA_TOPIC_ID",
    "Place",
    "RequestMapping",
    "ResponseMapping",
    "in_body",
    "in_partition",
]
