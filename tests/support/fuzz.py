"""A seeded generator of malformed Kafka requests.

Seeds are well-formed requests built with Riverlog's codec (realistic ones for the data APIs,
plus a populated sample of every API and version); each fuzz case applies one mutation: bit
flips, byte overwrites, truncation, lying size prefixes, unknown keys or versions, garbage
bodies, oversized frames, or invalid topic names. The same seed gives the same cases.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from riverlog.protocol.header import RequestHeader, encode_request_header
from riverlog.protocol.messages import MESSAGES
from riverlog.protocol.primitives import Writer
from riverlog.protocol.record_batch import NewRecord, build_batch

# Fields that would make a valid request wait a long time; clamped so the oracle stays fast.
_WAIT_FIELDS = ("max_wait_ms", "timeout_ms", "session_timeout_ms", "rebalance_timeout_ms")


@dataclass(frozen=True)
class FuzzCase:
    kind: str
    frame: bytes  # including the 4-byte size prefix


def encode_request(api_key: int, version: int, body: dict[str, Any], correlation_id: int,
                   client_id: str = "fuzzer") -> bytes:
    request, _ = MESSAGES[api_key]
    w = Writer()
    encode_request_header(w, RequestHeader(api_key, version, correlation_id, client_id),
                          request.is_flexible(version))
    request.encode_into(w, body, version)
    return struct.pack(">i", len(w.buf)) + bytes(w.buf)


def _clamp(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: (min(v, 50) if k in _WAIT_FIELDS and isinstance(v, int) else _clamp(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [_clamp(v) for v in value]
    return value


def realistic_seeds(topic: str) -> list[tuple[int, int, dict[str, Any]]]:
    """Requests a real client would send, against an existing topic."""
    batch = build_batch([NewRecord(b"v", b"k", [("h", b"x")], 1_700_000_000_000)])
    seeds: list[tuple[int, int, dict[str, Any]]] = []
    for v in (4, 9, 12):
        seeds.append((3, v, {"topics": [{"name": topic}], "allow_auto_topic_creation": False}))
    for v in (3, 8, 9, 11):
        seeds.append((0, v, {"acks": 1, "timeout_ms": 1000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}))
    for v in (4, 11, 12):
        seeds.append((1, v, {"replica_id": -1, "max_wait_ms": 10, "min_bytes": 1, "max_bytes": 1 << 20,
                             "topics": [{"topic": topic, "partitions": [
                                 {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                                  "current_leader_epoch": -1}]}]}))
    for v in (1, 5, 7):
        seeds.append((2, v, {"replica_id": -1, "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "timestamp": -2, "current_leader_epoch": -1}]}]}))
    seeds.append((19, 5, {"topics": [{"name": "fuzz-created", "num_partitions": 1, "replication_factor": 1}],
                          "timeout_ms": 1000, "validate_only": True}))
    seeds.append((32, 4, {"resources": [{"resource_type": 2, "resource_name": topic,
                                         "configuration_keys": None}]}))
    seeds.append((18, 3, {"client_software_name": "fuzz", "client_software_version": "1"}))
    return seeds


def sample_seeds() -> list[tuple[int, int, dict[str, Any]]]:
    """A populated value of every request type and version the codec knows."""
    from support.protocol_samples import sample

    seeds = []
    for key, (request, _) in sorted(MESSAGES.items()):
        for version in range(request.valid[0], request.valid[1] + 1):
            seeds.append((key, version, _clamp(sample(request, version))))
    return seeds


def may_stay_unanswered(frame: bytes) -> bool:
    """Whether silence is a legitimate answer to ``frame``: the frame is still incomplete (the
    broker waits for the rest), or it decodes as a valid request that may wait or get no
    response (a long fetch, acks=0 produce)."""
    from riverlog.protocol.header import decode_request_header, peek_header
    from riverlog.protocol.primitives import DecodeError, Reader

    size = struct.unpack(">i", frame[:4])[0]
    if size > len(frame) - 4:
        return True
    r = Reader(frame[4 : 4 + size])
    try:
        api_key, version, _ = peek_header(r)
        request, _ = MESSAGES[api_key]
        if not request.supports(version):
            return False
        r.pos = 0
        decode_request_header(r, request.is_flexible(version))
        request.decode(r, version)
    except (DecodeError, KeyError, ValueError):
        return False
    return True


def cases(seed: int, count: int, topic: str, max_frame: int) -> Iterator[FuzzCase]:
    rng = random.Random(seed)
    seeds = realistic_seeds(topic) + sample_seeds()
    for corr in range(1, count + 1):
        api_key, version, body = seeds[rng.randrange(len(seeds))]
        frame = bytearray(encode_request(api_key, version, body, corr))
        mutation = rng.randrange(10)
        if mutation <= 2:  # flip a few bits anywhere after the size prefix
            for _ in range(rng.randint(1, 4)):
                i = rng.randrange(4, len(frame))
                frame[i] ^= 1 << rng.randrange(8)
            yield FuzzCase("bitflip", bytes(frame))
        elif mutation == 3:  # truncated body with an honest size prefix
            cut = rng.randrange(8, max(9, len(frame)))
            body_bytes = frame[4:cut]
            yield FuzzCase("truncated", struct.pack(">i", len(body_bytes)) + bytes(body_bytes))
        elif mutation == 4:  # size prefix that lies (smaller than the data, or negative)
            lie = rng.choice([-1, -(1 << 31), 0, 3, rng.randrange(8, max(9, len(frame) - 4))])
            yield FuzzCase("wrong-size", struct.pack(">i", lie) + bytes(frame[4:]))
        elif mutation == 5:  # unknown API key or version
            key = rng.choice([rng.randrange(76, 32767), -1, 999])
            ver = rng.choice([version, 32000, -5])
            payload = bytearray(frame[4:])
            payload[0:4] = struct.pack(">hh", key, ver) if rng.random() < 0.5 else struct.pack(">hh", api_key, ver)
            yield FuzzCase("unknown-api", struct.pack(">i", len(payload)) + bytes(payload))
        elif mutation == 6:  # valid header, garbage body
            header_len = 8 + 2 + len("fuzzer")
            garbage = rng.randbytes(rng.randrange(0, 200))
            payload = bytes(frame[4 : 4 + header_len]) + garbage
            yield FuzzCase("garbage-body", struct.pack(">i", len(payload)) + payload)
        elif mutation == 7:  # oversized frame: only the prefix and a little data are sent
            size = rng.randrange(max_frame + 1, 1 << 31)
            yield FuzzCase("oversized", struct.pack(">i", size) + bytes(frame[4:40]))
        elif mutation == 8:  # invalid topic names in otherwise valid requests
            bad = rng.choice(["", ".", "..", "a" * 300, "bad name", "ü", "x/y", "a\x00b"])
            if rng.random() < 0.5:
                req = {"topics": [{"name": bad, "num_partitions": 1, "replication_factor": 1}],
                       "timeout_ms": 100}
                yield FuzzCase("bad-topic", encode_request(19, 5, req, corr))
            else:
                req = {"topics": [{"name": bad}], "allow_auto_topic_creation": True}
                yield FuzzCase("bad-topic", encode_request(3, 9, req, corr))
        else:  # overwrite a random run of bytes
            start = rng.randrange(4, len(frame))
            run = rng.randbytes(rng.randint(1, 16))
            frame[start : start + len(run)] = run
            payload = bytes(frame[4:])
            yield FuzzCase("overwrite", struct.pack(">i", len(payload)) + payload)
