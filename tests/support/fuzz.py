"""A seeded fuzzer of the Kafka wire protocol: a generator of malformed requests and a driver that
pipelines them at brokers over persistent connections.

Generation. Seeds are well-formed requests built with Riverlog's codec (realistic ones for the data
APIs, plus a populated sample of every API and version the codec knows), encoded once by an encoder
that mirrors the codec's and notes where every length, count and value field sits. Each fuzz case
is a copy of a seed with its own correlation id and one mutation: bit flips, a field set to a
boundary value, a string/bytes length or an array/tagged-field count that lies (huge, negative,
null, off by a little), a record batch whose counts lie under a recomputed CRC, truncation, a frame
size that lies (smaller, larger, negative), unknown keys or versions, garbage bodies, oversized
frames, invalid topic names, overwritten runs of bytes, or none. The same seed gives the same
cases; a case costs a bytearray copy and a few writes, not an encoding.

Expectation. ``predict`` runs the broker's own framing and decoding rules on a frame (what
``server/connection.py`` and ``server/dispatch.py`` do before a handler runs) to say what the broker
must do: answer, close, or possibly stay silent (a request that decodes may wait, acks=0 produce
and the quorum's RPCs may get no response, a frame still incomplete is waited for).

Driver. ``FuzzDriver`` keeps ``connections`` connections busy. Each takes the next burst from the
case stream: the cases up to the next one the broker must close on (that one included), at most
``burst`` of them, written in one go; answers are matched to frames in order by correlation id
(the broker handles one connection's requests one at a time). A frame whose size prefix is itself
the fault (too small, too large, lying, incomplete) is sent alone once everything before it on
the connection is settled, since the broker acts on a size as soon as it reads it. A connection
the broker did not close carries the next burst. Nothing waits a fixed time per request: a
connection is given up only after ``quiet_s`` without a byte, and that silence is a violation
unless the request it waits for may legitimately stay unanswered (then only after ``hang_s``).
"""

from __future__ import annotations

import asyncio
import random
import socket
import struct
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import crc32c
from riverlog.protocol.header import RequestHeader, decode_request_header, encode_request_header
from riverlog.protocol.messages import MESSAGES
from riverlog.protocol.primitives import DecodeError, Reader, Writer
from riverlog.protocol.record_batch import NewRecord, build_batch
from riverlog.protocol.schema import (
    BOOL,
    INT8,
    INT16,
    INT32,
    INT64,
    UINT16,
    UINT32,
    Array,
    FieldType,
    Struct,
    _Bytes,
    _Fixed,
    _in,
    _Records,
    _String,
)

# Fields that would make a valid request wait a long time: clamped in seeds, and value mutations
# give them only zero or negative values, so a mutated request waits no longer than a seed does.
_WAIT_FIELDS = frozenset({"max_wait_ms", "timeout_ms", "session_timeout_ms", "rebalance_timeout_ms"})
# Fields a value mutation leaves alone: validate_only=false would create a real topic per case
# (state that grows with the run and would hide a leak), acks is the one field whose change
# makes a request go unanswered (covered by the seeds and by bit flips).
_KEEP_FIELDS = frozenset({"validate_only", "acks"})

# Quorum RPCs: the broker answers them only if the quorum answers in time, else stays silent.
_QUORUM_RPCS = frozenset({52, 53, 54, 59})

_I32 = struct.Struct(">i")
_FIXED_FORMATS: dict[FieldType, tuple[str, int, int]] = {
    # codec type -> (struct format, smallest value, largest value)
    INT8: (">b", -(1 << 7), (1 << 7) - 1),
    BOOL: (">b", -(1 << 7), (1 << 7) - 1),
    INT16: (">h", -(1 << 15), (1 << 15) - 1),
    UINT16: (">H", 0, (1 << 16) - 1),
    INT32: (">i", -(1 << 31), (1 << 31) - 1),
    UINT32: (">I", 0, (1 << 32) - 1),
    INT64: (">q", -(1 << 63), (1 << 63) - 1),
}

_RANGES = {fmt: (lo, hi) for fmt, lo, hi in _FIXED_FORMATS.values()}

# Record batch layout (protocol/record_batch/batch_header.py): offsets inside a batch.
_BATCH_LENGTH_POS, _BATCH_CRC_POS, _BATCH_ATTRIBUTES_POS = 8, 17, 21
_BATCH_LAST_DELTA_POS, _BATCH_COUNT_POS, _BATCH_HEADER = 23, 57, 61


# --- seeds -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Slot:
    """Where a field sits in a seed's frame: ``fmt`` is a struct format or ``"uvarint"`` (then
    ``width`` is its encoded size); ``role`` is ``value``, ``length`` (string/bytes/records),
    ``count`` (array, tagged fields) or ``presence`` (a nullable struct's marker)."""

    pos: int
    fmt: str
    width: int
    role: str
    name: str


@dataclass(frozen=True, slots=True)
class Seed:
    api_key: int
    version: int
    frame: bytes  # size prefix included; correlation id 0
    slots: tuple[Slot, ...]
    batch: int | None  # position of a well-formed record batch in the frame, if any


@dataclass(frozen=True, slots=True)
class FuzzCase:
    kind: str
    frame: bytes  # including the 4-byte size prefix
    api_key: int = -1  # the seed's key and version (before any mutation)
    version: int = -1


class _TrackingEncoder:
    """Encodes a message exactly as ``schema.Struct.encode`` does, noting each field's slot.

    ``seed()`` compares the result with the codec's own encoding, so the two cannot drift apart
    silently."""

    def __init__(self) -> None:
        self.w = Writer()
        self.slots: list[Slot] = []

    def _note(self, fmt: str, width: int, role: str, name: str, pos: int | None = None) -> None:
        self.slots.append(Slot(len(self.w.buf) if pos is None else pos, fmt, width, role, name))

    def _uvarint(self, v: int, role: str, name: str) -> None:
        start = len(self.w.buf)
        self.w.uvarint(v)
        self._note("uvarint", len(self.w.buf) - start, role, name, start)

    def _length(self, n: int, flexible: bool, wide: bool, role: str, name: str) -> None:
        """A length prefix as ``schema._write_length`` writes it (-1 is null)."""
        if flexible:
            self._uvarint(n + 1, role, name)
        elif wide:
            self._note(">i", 4, role, name)
            self.w.int32(n)
        else:
            self._note(">h", 2, role, name)
            self.w.int16(n)

    def encode(self, t: FieldType, value: Any, flexible: bool, version: int, nullable: bool, name: str) -> None:
        w = self.w
        if isinstance(t, _Fixed):
            if t in _FIXED_FORMATS:
                fmt = _FIXED_FORMATS[t][0]
                self._note(fmt, struct.calcsize(fmt), "value", name)
            t.encode(w, value, flexible, version, nullable)
        elif isinstance(t, _String):
            if value is None and nullable:
                self._length(-1, flexible, False, "length", name)
                return
            data = ("" if value is None else value).encode("utf-8")
            self._length(len(data), flexible, False, "length", name)
            w.raw(data)
        elif isinstance(t, _Bytes | _Records):
            if value is None:  # both write an empty value where null is not allowed
                self._length(-1 if nullable else 0, flexible, True, "length", name)
                return
            self._length(len(value), flexible, True, "length", name)
            w.raw(value)
        elif isinstance(t, Array):
            if value is None:
                self._length(-1 if nullable else 0, flexible, True, "count", name)
                return
            self._length(len(value), flexible, True, "count", name)
            for element in value:
                self.encode(t.item, element, flexible, version, False, name)
        elif isinstance(t, Struct):
            self._struct(t, value, flexible, version, nullable, name)
        else:
            raise TypeError(f"the fuzzer's encoder does not know {t!r} ({name})")

    def _struct(self, t: Struct, value: Any, flexible: bool, version: int, nullable: bool, name: str) -> None:
        w = self.w
        if nullable:
            self._note(">b", 1, "presence", name)
            if value is None:
                w.int8(-1)
                return
            w.int8(1)
        elif value is None:
            value = {}
        plan = t.plan(version, flexible)
        for fname, ftype, fnullable in plan.regular:
            v = value.get(fname)
            if v is None and not fnullable:
                v = t._default_for(fname)
            self.encode(ftype, v, flexible, version, fnullable, fname)
        if flexible:
            present = [(tag, fld, value.get(fld.name)) for tag, fld in plan.tagged_order
                       if value.get(fld.name) is not None and value.get(fld.name) != fld.default_value()]
            self._uvarint(len(present), "count", f"{name}.tagged_fields")
            for tag, fld, v in present:
                sub = _TrackingEncoder()
                sub.encode(fld.type, v, flexible, version, _in(fld.nullable, version), fld.name)
                w.uvarint(tag)
                self._uvarint(len(sub.w.buf), "length", f"{fld.name}.tag_size")
                base = len(w.buf)
                w.raw(sub.w.buf)
                self.slots += [Slot(s.pos + base, s.fmt, s.width, s.role, s.name) for s in sub.slots]


def encode_request(api_key: int, version: int, body: dict[str, Any], correlation_id: int,
                   client_id: str = "fuzzer") -> bytes:
    request, _ = MESSAGES[api_key]
    w = Writer()
    encode_request_header(w, RequestHeader(api_key, version, correlation_id, client_id),
                          request.is_flexible(version))
    request.encode_into(w, body, version)
    return struct.pack(">i", len(w.buf)) + bytes(w.buf)


def seed(api_key: int, version: int, body: dict[str, Any]) -> Seed:
    """``body`` encoded as a request frame (correlation id 0), with the slots of its fields."""
    request, _ = MESSAGES[api_key]
    flexible = request.is_flexible(version)
    enc = _TrackingEncoder()
    w = enc.w
    w.int32(0)  # size prefix, set below
    w.int16(api_key)
    w.int16(version)
    w.int32(0)  # correlation id
    client_id = b"fuzzer"
    enc._note(">h", 2, "length", "client_id")
    w.int16(len(client_id))
    w.raw(client_id)
    if flexible:
        enc._uvarint(0, "count", "header.tagged_fields")
    enc.encode(request.body, body, flexible, version, False, request.name)
    struct.pack_into(">i", w.buf, 0, len(w.buf) - 4)
    frame = bytes(w.buf)
    expected = encode_request(api_key, version, body, 0)
    if frame != expected:
        raise AssertionError(f"the fuzzer's encoder disagrees with the codec on {request.name} v{version}")
    batch = None
    for slot in enc.slots:
        if slot.name == "records" and slot.role == "length":
            start = slot.pos + slot.width
            if len(frame) >= start + _BATCH_HEADER and frame[start + 16] == 2:
                batch = start
    return Seed(api_key, version, frame, tuple(enc.slots), batch)


def _clamp(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: (min(v, 50) if k in _WAIT_FIELDS and isinstance(v, int) else _clamp(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [_clamp(v) for v in value]
    return value


def realistic_seeds(topic: str) -> list[tuple[int, int, dict[str, Any]]]:
    """Requests a real client would send, against an existing topic."""
    batch = build_batch([NewRecord(b"v", b"k", [("h", b"x")], 1_700_000_000_000),
                         NewRecord(b"w", None, [], 1_700_000_000_001)])
    seeds: list[tuple[int, int, dict[str, Any]]] = []
    for v in (4, 9, 12):
        seeds.append((3, v, {"topics": [{"name": topic}], "allow_auto_topic_creation": False}))
    for v in (3, 8, 9, 11):
        seeds.append((0, v, {"acks": 1, "timeout_ms": 1000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}))
    seeds.append((0, 9, {"acks": 0, "timeout_ms": 1000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}))
    # Small fetches: the partition grows all run long, and a 1 MiB answer per fetch would make
    # the run a bandwidth test.
    for v in (4, 11, 12):
        seeds.append((1, v, {"replica_id": -1, "max_wait_ms": 10, "min_bytes": 1, "max_bytes": 4096,
                             "topics": [{"topic": topic, "partitions": [
                                 {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 4096,
                                  "current_leader_epoch": -1}]}]}))
    for v in (1, 5, 7):
        seeds.append((2, v, {"replica_id": -1, "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "timestamp": -2, "current_leader_epoch": -1}]}]}))
    # The broker's defaults (-1), as Kafka's AdminClient sends them. With 1, bit flips asked for
    # up to 65,537 partitions: Riverlog's controller accepts up to 100,000 per topic (Kafka: 10,000
    # per request) and places them all even for validate_only, seconds of its time and tens of MiB
    # on every node per request, which dominated the run's memory and time (issue #14).
    seeds.append((19, 5, {"topics": [{"name": "fuzz-created", "num_partitions": -1, "replication_factor": -1}],
                          "timeout_ms": 1000, "validate_only": True}))
    seeds.append((32, 4, {"resources": [{"resource_type": 2, "resource_name": topic,
                                         "configuration_keys": None}]}))
    seeds.append((18, 3, {"client_software_name": "fuzz", "client_software_version": "1"}))
    return [(k, v, _clamp(body)) for k, v, body in seeds]


def sample_seeds() -> list[tuple[int, int, dict[str, Any]]]:
    """A populated value of every request type and version the codec knows."""
    from support.protocol_samples import sample

    seeds = []
    for key, (request, _) in sorted(MESSAGES.items()):
        for version in range(request.valid[0], request.valid[1] + 1):
            body = _clamp(sample(request, version))
            if key == 19:
                body["validate_only"] = True  # see _KEEP_FIELDS
            seeds.append((key, version, body))
    return seeds


def all_seeds(topic: str) -> list[Seed]:
    return [seed(k, v, body) for k, v, body in realistic_seeds(topic) + sample_seeds()]


# --- mutations -------------------------------------------------------------------------------


def _with_size(payload: bytes | bytearray) -> bytes:
    return _I32.pack(len(payload)) + bytes(payload)


def _uvarint(v: int) -> bytes:
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _lie(rng: random.Random, slot: Slot, frame: bytearray) -> bytes:
    """``frame`` with the length or count at ``slot`` replaced by a lie; the frame's own size
    prefix stays honest (a varint's width may change)."""
    if slot.fmt == "uvarint":
        r = Reader(frame, slot.pos)
        truth = r.uvarint()
        lie = rng.choice([0, 0, 1, truth + 1, truth + 2, max(0, truth - 1), (1 << 31) - 1, 1 << 31,
                          (1 << 32) + 1, (1 << 63) - 1, rng.randrange(1 << 28), 1 << 64])
        data = _uvarint(lie) if lie < (1 << 64) else b"\xff" * 10 + b"\x01"  # 1 << 64: varint too long
        payload = frame[4:slot.pos] + data + frame[slot.pos + slot.width:]
        return _with_size(payload)
    fmt = slot.fmt
    truth = struct.unpack_from(fmt, frame, slot.pos)[0]
    lo, top = _RANGES[fmt]
    lie = rng.choice([-1, -1, -2, lo, 0, truth + 1, truth + 2, truth - 1, top, top - 1, rng.randrange(top)])
    struct.pack_into(fmt, frame, slot.pos, min(max(lie, lo), top))
    return bytes(frame)


def _boundary(rng: random.Random, slot: Slot, frame: bytearray) -> bytes:
    """``frame`` with the fixed-width value at ``slot`` set to a boundary value."""
    fmt = slot.fmt
    lo, hi = _RANGES[fmt]
    if slot.name in _WAIT_FIELDS:
        value = rng.choice([0, -1, lo])
    else:
        value = rng.choice([0, -1 if lo < 0 else 0, 1, lo, hi, lo + 1, hi - 1, rng.randint(lo, hi)])
    struct.pack_into(fmt, frame, slot.pos, value)
    return bytes(frame)


def _batch_lie(rng: random.Random, start: int, frame: bytearray) -> bytes:
    """A lie inside the record batch at ``start``, under a CRC recomputed so that the broker
    reads past the checksum: a record count or last offset delta that is huge, negative or off
    by one, a batch length that disagrees with the bytes, or a record's own length varint."""
    length = _I32.unpack_from(frame, start + _BATCH_LENGTH_POS)[0]
    end = min(len(frame), start + 12 + length)
    choice = rng.randrange(4)
    if choice == 0:
        count = _I32.unpack_from(frame, start + _BATCH_COUNT_POS)[0]
        _I32.pack_into(frame, start + _BATCH_COUNT_POS,
                       rng.choice([0, -1, -(1 << 31), (1 << 31) - 1, count + 1, count - 1, 1 << 20]))
    elif choice == 1:
        _I32.pack_into(frame, start + _BATCH_LAST_DELTA_POS, rng.choice([-1, -(1 << 31), (1 << 31) - 1, 5]))
    elif choice == 2:
        _I32.pack_into(frame, start + _BATCH_LENGTH_POS, rng.choice([0, -1, 48, length - 1, length + 1, 1 << 30]))
    else:
        # The first record's length (a zigzag varint right after the header): negative or huge.
        frame[start + _BATCH_HEADER] = rng.choice([0x01, 0x03, 0x7E, 0xFF])
    struct.pack_into(">I", frame, start + _BATCH_CRC_POS,
                     crc32c.crc32c(bytes(frame[start + _BATCH_ATTRIBUTES_POS:end])))
    return bytes(frame)


# Mutation kinds and their weights: most cases stay close enough to a valid request to reach the
# decoder's depths or a handler; framing faults get a steady share.
MUTATIONS: dict[str, int] = {
    "bitflip": 6,
    "boundary-value": 8,
    "length-lie": 3,
    "count-lie": 3,
    "batch-lie": 1,
    "truncated": 1,
    "frame-size-lie": 1,
    "incomplete": 1,
    "unknown-api": 1,
    "garbage-body": 1,
    "oversized": 1,
    "bad-topic": 2,
    "overwrite": 2,
    "unmutated": 1,
}


def cases(seed_value: int, count: int | None, topic: str, max_frame: int,
          seeds: Sequence[Seed] | None = None) -> Iterator[FuzzCase]:
    """``count`` cases (endless if None) from ``seed_value``: the same arguments, the same cases."""
    rng = random.Random(seed_value)
    pool = list(seeds) if seeds is not None else all_seeds(topic)
    kinds = list(MUTATIONS)
    weights = list(MUTATIONS.values())
    cum = [sum(weights[: i + 1]) for i in range(len(weights))]
    by_role: list[dict[str, list[Slot]]] = []
    for s in pool:
        roles: dict[str, list[Slot]] = {"value": [], "length": [], "count": []}
        for slot in s.slots:
            if slot.role == "value" and slot.name in _KEEP_FIELDS:
                continue
            roles.setdefault(slot.role, []).append(slot)
        roles["length"] += roles.get("presence", [])
        by_role.append(roles)
    bad_topics = ["", ".", "..", "a" * 300, "bad name", "ü", "x/y", "a\x00b", "__cluster_metadata"]
    corr = 0
    while count is None or corr < count:
        corr += 1
        index = rng.randrange(len(pool))
        s = pool[index]
        frame = bytearray(s.frame)
        _I32.pack_into(frame, 8, corr)
        kind = rng.choices(kinds, cum_weights=cum)[0]
        roles = by_role[index]
        if kind == "batch-lie" and s.batch is None:
            kind = "count-lie"
        if kind == "boundary-value" and not roles["value"]:
            kind = "length-lie"
        if kind == "count-lie" and not roles["count"]:
            kind = "length-lie"
        out: bytes
        if kind == "bitflip":  # a few bits anywhere after the size prefix
            for _ in range(rng.randint(1, 4)):
                i = rng.randrange(4, len(frame))
                frame[i] ^= 1 << rng.randrange(8)
            out = bytes(frame)
        elif kind == "boundary-value":
            out = _boundary(rng, rng.choice(roles["value"]), frame)
        elif kind in ("length-lie", "count-lie"):
            out = _lie(rng, rng.choice(roles["length" if kind == "length-lie" else "count"]), frame)
        elif kind == "batch-lie":
            assert s.batch is not None
            out = _batch_lie(rng, s.batch, frame)
        elif kind == "truncated":  # honest size prefix, body cut short
            cut = rng.randrange(12, max(13, len(frame)))
            out = _with_size(frame[4:cut])
        elif kind == "frame-size-lie":  # smaller than the data, tiny, zero or negative
            lie = rng.choice([-1, -(1 << 31), 0, 3, 7, rng.randrange(8, max(9, len(frame) - 4))])
            out = _I32.pack(lie) + bytes(frame[4:])
        elif kind == "incomplete":  # larger than the data but within the limit: the rest never comes
            out = _I32.pack(rng.randrange(len(frame) - 3, max_frame + 1)) + bytes(frame[4:])
        elif kind == "unknown-api":
            key = rng.choice([rng.randrange(76, 32767), -1, 999, 17, 10001, s.api_key])
            ver = rng.choice([s.version, 32000, -5, rng.randrange(-32768, 32768)])
            struct.pack_into(">hh", frame, 4, key, ver)
            out = bytes(frame)
        elif kind == "garbage-body":  # a valid header, then noise
            header_len = 8 + 2 + len("fuzzer")
            out = _with_size(bytes(frame[4 : 4 + header_len]) + rng.randbytes(rng.randrange(0, 200)))
        elif kind == "oversized":  # only the prefix and a little data are sent
            out = _I32.pack(rng.randrange(max_frame + 1, 1 << 31)) + bytes(frame[4:40])
        elif kind == "bad-topic":  # invalid topic names in otherwise valid requests
            bad = rng.choice(bad_topics)
            if rng.random() < 0.5:
                req = {"topics": [{"name": bad, "num_partitions": 1, "replication_factor": 1}],
                       "timeout_ms": 100, "validate_only": rng.random() < 0.5}
                yield FuzzCase(kind, encode_request(19, 5, req, corr), 19, 5)
                continue
            req = {"topics": [{"name": bad}], "allow_auto_topic_creation": True}
            yield FuzzCase(kind, encode_request(3, 9, req, corr), 3, 9)
            continue
        elif kind == "overwrite":  # a random run of bytes
            start = rng.randrange(4, len(frame))
            run = rng.randbytes(rng.randint(1, 16))
            frame[start : start + len(run)] = run
            out = _with_size(frame[4:])
        else:  # unmutated: every API and version also arrives intact now and then
            out = bytes(frame)
        yield FuzzCase(kind, out, s.api_key, s.version)


# --- expectations ----------------------------------------------------------------------------

ANSWER = "answer"  # must be answered: ApiVersions with a version the broker does not know
VALID = "valid"  # decodes: answered, or waits (a fetch, a join), or closed by a failing handler
QUIET = "quiet"  # decodes and may get no response at all: acks=0 produce, the quorum's RPCs
CLOSE = "close"  # must be closed: an unknown key or version, an undecodable header or body
BAD_SIZE = "bad-size"  # size prefix below 8 or above the limit: closed as soon as it is read
INCOMPLETE = "incomplete"  # size prefix beyond the bytes sent: the broker waits for the rest
DESYNC = "desync"  # size prefix short of the bytes sent: the rest reads as further frames

# Frames whose size prefix is the fault: the broker acts on them while reading, before it has
# handled what came earlier on the connection, so they travel alone.
TAIL_EXPECTATIONS = frozenset({BAD_SIZE, INCOMPLETE, DESYNC})
# What the broker may do without breaking the oracle, per expectation.
ALLOWED_SILENCE = frozenset({VALID, QUIET, INCOMPLETE, DESYNC})


def broker_api_ranges() -> dict[int, tuple[int, int]]:
    """The versions Riverlog's broker serves per API key (what its dispatcher accepts)."""
    from riverlog.handlers import ADVERTISED_MIN, HANDLERS

    out = {}
    for key in HANDLERS:
        request, _ = MESSAGES[key]
        out[int(key)] = (ADVERTISED_MIN.get(key, request.valid[0]), request.valid[1])
    return out


def predict(frame: bytes, apis: Mapping[int, tuple[int, int]], max_frame: int) -> str:
    """What the broker's framing and dispatch rules make of ``frame``: one of the expectations
    above. A decoder that raises anything but DecodeError is a codec bug and propagates."""
    size = _I32.unpack_from(frame)[0]
    if size < 8 or size > max_frame:
        return BAD_SIZE
    if size > len(frame) - 4:
        return INCOMPLETE
    if size < len(frame) - 4:
        return DESYNC
    r = Reader(frame, 4)
    api_key, version = struct.unpack_from(">hh", frame, 4)
    supported = apis.get(api_key)
    request = MESSAGES[api_key][0] if api_key in MESSAGES else None
    if supported is None or request is None or not request.supports(version) \
            or not supported[0] <= version <= supported[1]:
        return ANSWER if api_key == 18 else CLOSE
    try:
        decode_request_header(r, request.is_flexible(version))
        body = request.decode(r, version)
    except DecodeError:
        return CLOSE
    if (api_key == 0 and body.get("acks") == 0) or api_key in _QUORUM_RPCS:
        return QUIET
    if api_key == 1 and any(t.get("topic") == "__cluster_metadata" for t in body.get("topics") or ()):
        return QUIET  # a quorum fetch: the quorum answers it or lets it time out
    return VALID


# --- the driver ------------------------------------------------------------------------------


@dataclass(slots=True)
class _Frame:
    case: FuzzCase | None  # None: the driver's own sentinel request
    expect: str
    corr: int | None
    outcome: str | None = None


@dataclass
class FuzzStats:
    outcomes: Counter[tuple[str, str]] = field(default_factory=Counter)  # (kind, outcome)
    by_expectation: Counter[tuple[str, str]] = field(default_factory=Counter)  # (expectation, outcome)
    coverage: Counter[tuple[int, int]] = field(default_factory=Counter)  # (api key, version) sent
    silent_valid: Counter[str] = field(default_factory=Counter)  # "key vN" of valid requests left waiting
    violations: list[str] = field(default_factory=list)
    processed: int = 0  # requests the broker answered, closed on, or legitimately left waiting
    generated: int = 0
    unreached: int = 0  # sent after a request the broker closed on, or behind one left waiting
    connections: int = 0
    sentinels: int = 0
    started: float = 0.0
    elapsed: float = 0.0

    @property
    def rate(self) -> float:
        return self.processed / self.elapsed if self.elapsed else 0.0

    def summary(self) -> str:
        kinds = sorted({k for k, _ in self.outcomes})
        outcomes = sorted({o for _, o in self.outcomes})
        lines = [f"{'':>16}" + "".join(f"{o:>10}" for o in outcomes)]
        for k in kinds:
            lines.append(f"{k:>16}" + "".join(f"{self.outcomes[(k, o)]:>10}" for o in outcomes))
        expectations = ", ".join(f"{e}/{o}: {n}" for (e, o), n in sorted(self.by_expectation.items()))
        lines.append(f"by expectation: {expectations}")
        if self.silent_valid:
            waited = ", ".join(f"{api}: {n}" for api, n in self.silent_valid.most_common(8))
            lines.append(f"valid requests still waiting when the driver moved on, by API: {waited}")
        lines.append(f"{self.processed} requests in {self.elapsed:.1f} s ({self.rate:.0f}/s) over "
                     f"{self.connections} connections; {self.unreached} unreached, {self.sentinels} sentinels, "
                     f"{len(self.coverage)} API versions")
        return "\n".join(lines)


CONNECT_TIMEOUT_S = 10.0
_SENTINEL = encode_request(18, 3, {"client_software_name": "fuzz-sentinel", "client_software_version": "1"}, 0)


class _Connection(asyncio.Protocol):
    """One fuzzing connection: the frames of the burst in flight, settled as answers arrive."""

    def __init__(self, driver: FuzzDriver) -> None:
        self.driver = driver
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.frames: list[_Frame] = []
        self.next = 0  # the first frame not answered yet
        self.tail: _Frame | None = None  # a size-fault frame, sent once everything before it settled
        self.eof = False
        self.gave_up = False  # the driver stopped waiting for a silent broker
        self.waiter: asyncio.Future[None] | None = None
        self.last_progress = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.last_progress = self.driver.now
        buf = self.buf
        buf += data
        pos = 0
        while len(buf) - pos >= 8:
            size = int.from_bytes(buf[pos : pos + 4], "big", signed=True)
            if len(buf) - pos - 4 < size:
                break
            corr = int.from_bytes(buf[pos + 4 : pos + 8], "big", signed=True)
            pos += 4 + size
            self._answered(corr)
        if pos:
            del buf[:pos]

    def _answered(self, corr: int) -> None:
        if self.tail is not None:  # whatever the broker made of a stream that lied about a size
            self.tail.outcome = "answered"
            return
        frames = self.frames
        for j in range(self.next, len(frames)):
            if frames[j].corr == corr:
                for skipped in frames[self.next : j]:
                    skipped.outcome = "skipped"
                frames[j].outcome = "answered"
                self.next = j + 1
                if self.next == len(frames):
                    self.wake()
                return
        self.driver.violation(f"an answer with correlation id {corr} matches no request in flight "
                              f"({[f.corr for f in frames[self.next:]]})")

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self.wake()

    def wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def settled(self) -> bool:
        return self.eof or self.gave_up or (self.tail is None and self.next == len(self.frames))

    def blocker(self) -> int | None:
        """Index of the request the broker closed on (at EOF) or is still busy with (when it
        went silent), among the frames not answered; None if there are none. Requests that get
        no answer (QUIET) are passed over, since the broker may be done with them, unless the
        next one could not have closed the connection or stayed silent (our sentinel; or, for
        silence, one that must be answered or closed): then the last of them is the one."""
        rest = self.frames[self.next :]
        if not rest:
            return None
        i = next((i for i, f in enumerate(rest) if f.expect != QUIET), len(rest) - 1)
        if i > 0 and (rest[i].case is None or (not self.eof and rest[i].expect not in ALLOWED_SILENCE)):
            i -= 1
        return i

    def waiting_on(self) -> _Frame | None:
        """The request the connection waits for."""
        if self.tail is not None:
            return self.tail
        i = self.blocker()
        return None if i is None else self.frames[self.next + i]

    def write(self, data: bytes) -> None:
        assert self.transport is not None
        self.last_progress = self.driver.now
        self.transport.write(data)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class FuzzDriver:
    """Sends ``case_stream`` to ``addresses`` (connections spread over them) until ``target``
    requests were processed or ``deadline`` (a ``time.monotonic()`` value) passes. ``run``
    returns the statistics; ``on_tick`` is called about once a second (where a test samples the
    broker's memory)."""

    def __init__(self, addresses: Sequence[tuple[str, int]], case_stream: Iterator[FuzzCase], *,
                 target: int, deadline: float, max_frame: int, apis: Mapping[int, tuple[int, int]],
                 connections: int = 32, burst: int = 32, quiet_s: float = 1.0, hang_s: float = 15.0,
                 on_tick: Callable[[FuzzStats], None] | None = None) -> None:
        self.addresses = list(addresses)
        self.cases = case_stream
        self.target = target
        self.deadline = deadline
        self.max_frame = max_frame
        self.apis = apis
        self.connections = connections
        self.burst = burst
        self.quiet_s = quiet_s
        self.hang_s = hang_s
        self.on_tick = on_tick
        self.stats = FuzzStats()
        self.now = 0.0
        self._pending: FuzzCase | None = None
        self._sentinel_corr = -1
        self._active: set[_Connection] = set()
        self._stopping = False

    def violation(self, message: str) -> None:
        if len(self.stats.violations) < 100:
            self.stats.violations.append(message)

    # --- bursts ------------------------------------------------------------------------------

    def _pull(self) -> FuzzCase | None:
        if self._pending is not None:
            case, self._pending = self._pending, None
            return case
        case = next(self.cases, None)
        if case is not None:
            self.stats.generated += 1
            self.stats.coverage[(case.api_key, case.version)] += 1
        return case

    def _next_burst(self) -> tuple[list[_Frame], _Frame | None] | None:
        """The frames of one connection's next write, and a size-fault frame to send after them.
        Bursts depend only on the case stream, not on timing: the same seed, the same bursts."""
        if self._stopping:
            return None
        frames: list[_Frame] = []
        seen: set[int] = set()
        tail = None
        while len(frames) < self.burst:
            case = self._pull()
            if case is None:
                break
            expect = predict(case.frame, self.apis, self.max_frame)
            if expect in TAIL_EXPECTATIONS:
                tail = _Frame(case, expect, None)
                break
            corr = _I32.unpack_from(case.frame, 8)[0]
            if corr in seen:  # answers are matched by correlation id: unique within a write
                self._pending = case
                break
            seen.add(corr)
            frames.append(_Frame(case, expect, corr))
            if expect == CLOSE:
                break
        if frames and frames[-1].expect == QUIET:
            # Nothing would tell when a request that gets no answer was handled: an ApiVersions
            # request after it does.
            while self._sentinel_corr in seen:
                self._sentinel_corr -= 1
            frames.append(_Frame(None, ANSWER, self._sentinel_corr))
            self._sentinel_corr = self._sentinel_corr - 1 if self._sentinel_corr > -(1 << 30) else -1
            self.stats.sentinels += 1
        if not frames and tail is None:
            return None
        return frames, tail

    # --- outcomes ----------------------------------------------------------------------------

    def _record(self, frame: _Frame, outcome: str) -> None:
        frame.outcome = outcome
        case = frame.case
        if case is None:
            if outcome in ("silent", "closed"):
                self.violation(f"the sentinel ApiVersions request was {outcome}")
            return
        stats = self.stats
        if outcome == "unreached":
            stats.unreached += 1
            return
        stats.processed += 1
        stats.outcomes[(case.kind, outcome)] += 1
        stats.by_expectation[(frame.expect, outcome)] += 1
        if outcome == "silent" and frame.expect == VALID:
            api_key, version = struct.unpack_from(">hh", case.frame, 4)
            stats.silent_valid[f"{api_key} v{version}"] += 1
        if outcome == "silent" and frame.expect not in ALLOWED_SILENCE:
            self.violation(f"{case.kind} ({frame.expect}) neither answered nor closed within "
                           f"{self.hang_s:.0f} s: {case.frame[:64].hex()}")
        elif outcome == "skipped" and frame.expect != QUIET:
            self.violation(f"{case.kind} ({frame.expect}) got no answer though a later request did: "
                           f"{case.frame[:64].hex()}")

    def _settle(self, conn: _Connection) -> None:
        """Give every frame of the burst its outcome: answered; else the first request not
        answered is the one the broker closed on or still holds (``silent``), requests with no
        answer due before it were handled without one, and those after it never ran."""
        frames, start = conn.frames, conn.next
        for frame in frames[:start]:
            self._record(frame, frame.outcome or "answered")
        rest = frames[start:]
        blocker = conn.blocker()
        if blocker is not None:
            for i, frame in enumerate(rest):
                if i < blocker:
                    self._record(frame, "skipped")
                elif i == blocker:
                    self._record(frame, "closed" if conn.eof else "silent")
                else:
                    self._record(frame, "unreached")
        conn.frames, conn.next = [], 0

    def _give_up_on_silence(self) -> None:
        """Stop waiting on connections silent for ``quiet_s`` where silence is allowed, or for
        ``hang_s`` where it is not (then the outcome is a violation)."""
        now = self.now
        for conn in self._active:
            quiet = now - conn.last_progress
            if quiet < self.quiet_s or conn.settled():
                continue
            waiting_on = conn.waiting_on()
            if (waiting_on is not None and waiting_on.expect in ALLOWED_SILENCE) or quiet >= self.hang_s:
                conn.gave_up = True
                conn.wake()

    # --- connections -------------------------------------------------------------------------

    async def _connect(self, address: tuple[str, int]) -> _Connection:
        # A blocking connect with a timeout, then asyncio takes the socket over: a connection
        # per closed request made create_connection's resolving and its second connect call a
        # third of the driver's time. The brokers are local, so the handshake is done within
        # the call unless a broker's accept queue is full (then the timeout bounds the wait).
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.settimeout(CONNECT_TIMEOUT_S)
            sock.connect(address)
            sock.setblocking(False)
            _, conn = await asyncio.get_running_loop().create_connection(lambda: _Connection(self), sock=sock)
        except BaseException:
            sock.close()
            raise
        self.stats.connections += 1
        return conn

    async def _until_settled(self, conn: _Connection) -> None:
        loop = asyncio.get_running_loop()
        while not conn.settled():
            conn.waiter = loop.create_future()
            await conn.waiter

    async def _worker(self, n: int) -> None:
        address = self.addresses[n % len(self.addresses)]
        conn: _Connection | None = None
        try:
            while (burst := self._next_burst()) is not None:
                frames, tail = burst
                if conn is None:
                    conn = await self._connect(address)
                self._active.add(conn)
                if frames:
                    conn.frames = frames
                    conn.write(b"".join(_SENTINEL[:8] + _I32.pack(f.corr or 0) + _SENTINEL[12:]
                                        if f.case is None else f.case.frame for f in frames))
                    await self._until_settled(conn)
                    self._settle(conn)
                if tail is not None:
                    if conn.eof or conn.gave_up:  # a size fault goes on a stream of its own
                        self._active.discard(conn)
                        conn.close()
                        conn = await self._connect(address)
                        self._active.add(conn)
                    await self._send_tail(conn, tail)
                self._active.discard(conn)
                if conn.eof or conn.gave_up or tail is not None:
                    conn.close()
                    conn = None
        finally:
            if conn is not None:
                self._active.discard(conn)
                conn.close()

    async def _send_tail(self, conn: _Connection, tail: _Frame) -> None:
        """Send a frame whose size prefix is the fault, on a connection with nothing in flight:
        an incomplete frame is left for the broker to wait on (the client hangs up); a bad or
        lying size must end in a close, or (a lie) in whatever the rest of the bytes read as."""
        assert tail.case is not None
        conn.tail = tail
        conn.write(tail.case.frame)
        if tail.expect == INCOMPLETE:
            self._record(tail, "silent")
            return
        await self._until_settled(conn)
        if conn.eof:
            self._record(tail, "closed")
        else:
            self._record(tail, tail.outcome or "silent")

    async def run(self) -> FuzzStats:
        loop = asyncio.get_running_loop()
        stats = self.stats
        self.now = loop.time()
        stats.started = time.monotonic()

        async def clock() -> None:
            ticks = 0
            while True:
                await asyncio.sleep(0.05)
                self.now = loop.time()
                if stats.processed >= self.target or time.monotonic() >= self.deadline:
                    self._stopping = True
                ticks += 1
                if ticks % 5 == 0:
                    self._give_up_on_silence()
                if ticks % 20 == 0 and self.on_tick is not None:
                    stats.elapsed = time.monotonic() - stats.started
                    self.on_tick(stats)

        ticker = loop.create_task(clock())
        try:
            await asyncio.gather(*(self._worker(n) for n in range(self.connections)))
        finally:
            ticker.cancel()
        stats.elapsed = time.monotonic() - stats.started
        return stats
