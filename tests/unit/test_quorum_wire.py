"""Raft core messages through Kafka's KRaft RPCs (``controller/quorum/wire.py``).

Every message goes all the way: core message -> request/response body -> bytes with the API's
schema at the version used -> body -> core message, and must come back equal.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest
from riverlog.controller.quorum import wire
from riverlog.controller.raft import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    Entry,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    OffsetAndEpoch,
    VoteRequest,
    VoteResponse,
)
from riverlog.controller.raft import ErrorCode as RaftError
from riverlog.protocol import record_batch
from riverlog.protocol.api_keys import ApiKey
from riverlog.protocol.errors import ErrorCode
from riverlog.protocol.messages import MESSAGES
from riverlog.protocol.primitives import Reader

pytestmark = pytest.mark.unit

CLUSTER = "riverlog-test-cluster"

VOTE = VoteRequest(1, 2, 5, 4, 100, pre_vote=True)
REAL_VOTE = VoteRequest(1, 2, 6, 4, 100)
BEGIN = BeginQuorumEpochRequest(1, 2, 7)
END = EndQuorumEpochRequest(1, 2, 7, (3, 2))
FETCH = FetchRequest(3, 1, 7, 120, 6, 500)
FETCH_SNAPSHOT = FetchSnapshotRequest(3, 1, 7, OffsetAndEpoch(100, 5), 4096)

MIXED = (
    Entry(120, 6, b"a"),
    Entry(121, 6, b""),
    Entry(122, 7, b'{"leader_id": 1}', True),
    Entry(123, 7, b"b"),
    Entry(124, 7, b"c"),
)

REQUESTS = [
    VOTE,
    REAL_VOTE,
    BEGIN,
    END,
    EndQuorumEpochRequest(1, 2, 7),
    FETCH,
    FetchRequest(4, 1, 0, 0, 0, 0),  # an observer with an empty log
    FETCH_SNAPSHOT,
]

# (response, the request it answers)
RESPONSES: list[tuple[Message, Message]] = [
    (VoteResponse(2, 1, 5, True, None, True), VOTE),
    (VoteResponse(2, 1, 6, False, 3), REAL_VOTE),
    (VoteResponse(2, 1, 6, False, None, False, RaftError.INCONSISTENT_VOTER_SET), REAL_VOTE),
    (BeginQuorumEpochResponse(2, 1, 7, 1), BEGIN),
    (BeginQuorumEpochResponse(2, 1, 8, None, RaftError.FENCED_LEADER_EPOCH), BEGIN),
    (EndQuorumEpochResponse(2, 1, 7, None), END),
    (FetchResponse(1, 3, 7, 1, RaftError.NONE, 120, 6, 118, MIXED), FETCH),
    (FetchResponse(1, 3, 7, 1, RaftError.NONE, 120, 6, 120), FETCH),
    (FetchResponse(1, 3, 7, 1, RaftError.NONE, 120, 6, 90, diverging=OffsetAndEpoch(110, 5)), FETCH),
    (FetchResponse(1, 3, 7, 1, RaftError.NONE, 120, 6, 90, diverging=OffsetAndEpoch(0, 0)), FETCH),
    (FetchResponse(1, 3, 7, 1, RaftError.NONE, 120, 6, 150, snapshot_id=OffsetAndEpoch(140, 7)), FETCH),
    (FetchResponse(1, 3, 8, None, RaftError.NOT_LEADER_OR_FOLLOWER, 120, 6), FETCH),
    (FetchResponse(1, 3, 9, 2, RaftError.FENCED_LEADER_EPOCH, 120, 6), FETCH),
    (FetchSnapshotResponse(1, 3, 7, 1, RaftError.NONE, OffsetAndEpoch(100, 5), 4096, 10000, b"chunk"),
     FETCH_SNAPSHOT),
    (FetchSnapshotResponse(1, 3, 7, 1, RaftError.SNAPSHOT_NOT_FOUND, OffsetAndEpoch(100, 5), 4096),
     FETCH_SNAPSHOT),
]


def _request_bytes(msg: Message, cluster_id: str = CLUSTER) -> tuple[ApiKey, int, bytes]:
    api_key, version, body = wire.encode_request(msg, cluster_id)
    return api_key, version, MESSAGES[api_key][0].encode(body, version)


def _receive_request(api_key: int, version: int, data: bytes, *, local_id: int,
                     cluster_id: str = CLUSTER) -> Message | ErrorCode:
    body = MESSAGES[api_key][0].decode(Reader(data), version)
    return wire.decode_request(api_key, version, body, local_id=local_id, cluster_id=cluster_id)


def _response_through_wire(msg: Message, request: Message, version: int | None = None) -> Message:
    api_key, latest, _ = wire.encode_request(request, CLUSTER)
    version = latest if version is None else version
    schema = MESSAGES[api_key][1]
    data = schema.encode(wire.encode_response(msg, api_key, version), version)
    return wire.decode_response(api_key, schema.decode(data, version), request)


def _error_response_body(api_key: int, version: int, code: ErrorCode) -> dict[str, Any]:
    schema = MESSAGES[api_key][1]
    return schema.decode(schema.encode(wire.error_response(api_key, version, code), version), version)


# --- round trips ------------------------------------------------------------------------------


def test_requests_go_at_the_highest_versions() -> None:
    sent = {wire.encode_request(m, CLUSTER)[:2] for m in (VOTE, BEGIN, END, FETCH, FETCH_SNAPSHOT)}
    assert sent == {
        (ApiKey.VOTE, 2),
        (ApiKey.BEGIN_QUORUM_EPOCH, 1),
        (ApiKey.END_QUORUM_EPOCH, 1),
        (ApiKey.FETCH, 18),
        (ApiKey.FETCH_SNAPSHOT, 1),
    }


@pytest.mark.parametrize("msg", REQUESTS, ids=lambda m: type(m).__name__)
def test_request_round_trip(msg: Message) -> None:
    api_key, version, data = _request_bytes(msg)
    assert _receive_request(api_key, version, data, local_id=msg.dst) == msg


@pytest.mark.parametrize(("msg", "request_msg"), RESPONSES, ids=lambda m: type(m).__name__)
def test_response_round_trip(msg: Message, request_msg: Message) -> None:
    assert _response_through_wire(msg, request_msg) == msg


@pytest.mark.parametrize("version", range(12, 19))
def test_fetch_at_every_version_with_last_fetched_epoch(version: int) -> None:
    # Topics go by name up to version 12, by id from 13; the replica id moves into ReplicaState
    # at 15; the response's current leader, diverging epoch and snapshot id are tagged from 12.
    _, _, body = wire.encode_request(FETCH, CLUSTER)
    data = MESSAGES[ApiKey.FETCH][0].encode(body, version)
    assert _receive_request(ApiKey.FETCH, version, data, local_id=1) == FETCH
    for response, request in RESPONSES:
        if isinstance(response, FetchResponse):
            assert _response_through_wire(response, request, version) == response


def test_older_versions_of_vote_and_end_quorum_epoch() -> None:
    for version in (0, 1):
        _, _, body = wire.encode_request(REAL_VOTE, CLUSTER)
        data = MESSAGES[ApiKey.VOTE][0].encode(body, version)
        assert _receive_request(ApiKey.VOTE, version, data, local_id=2) == REAL_VOTE
        assert _response_through_wire(VoteResponse(2, 1, 6, True), REAL_VOTE, version) == VoteResponse(2, 1, 6, True)
    # Version 0 has PreferredSuccessors (ids), version 1 PreferredCandidates (ids + directories).
    for version in (0, 1):
        _, _, body = wire.encode_request(END, CLUSTER)
        data = MESSAGES[ApiKey.END_QUORUM_EPOCH][0].encode(body, version)
        assert _receive_request(ApiKey.END_QUORUM_EPOCH, version, data, local_id=2) == END
    _, _, body = wire.encode_request(BEGIN, CLUSTER)
    data = MESSAGES[ApiKey.BEGIN_QUORUM_EPOCH][0].encode(body, 0)
    assert _receive_request(ApiKey.BEGIN_QUORUM_EPOCH, 0, data, local_id=2) == BEGIN


def test_a_pre_vote_cannot_travel_below_vote_v2() -> None:
    # PreVote is new in version 2: an older version reads the request as a real vote, which is
    # why requests always go at the highest version.
    _, _, body = wire.encode_request(VOTE, CLUSTER)
    data = MESSAGES[ApiKey.VOTE][0].encode(body, 1)
    decoded = _receive_request(ApiKey.VOTE, 1, data, local_id=2)
    assert isinstance(decoded, VoteRequest) and decoded.pre_vote is False


def test_fetch_names_kafkas_metadata_partition() -> None:
    api_key, version, data = _request_bytes(FETCH)
    body = MESSAGES[api_key][0].decode(data, version)
    assert body["cluster_id"] == CLUSTER
    assert body["replica_state"] == {"replica_id": 3, "replica_epoch": -1}
    [topic] = body["topics"]
    assert base64.urlsafe_b64encode(topic["topic_id"].bytes).rstrip(b"=") == b"AAAAAAAAAAAAAAAAAAAAAQ"
    [partition] = topic["partitions"]
    assert (partition["partition"], partition["current_leader_epoch"]) == (0, 7)
    assert (partition["fetch_offset"], partition["last_fetched_epoch"]) == (120, 6)
    assert body["max_wait_ms"] == 500 and body["session_id"] == 0 and body["session_epoch"] == -1


def test_response_fields_come_from_the_request() -> None:
    # A response's src/dst are its request's dst/src; Vote's pre-vote flag and Fetch's position
    # are not on the wire and echo the request.
    reply = _response_through_wire(VoteResponse(2, 1, 5, True, None, True), VOTE)
    assert isinstance(reply, VoteResponse)
    assert (reply.src, reply.dst, reply.pre_vote) == (2, 1, True)
    fetch = FetchRequest(3, 1, 7, 121, 6, 500)
    response = _response_through_wire(FetchResponse(1, 3, 7, 1, RaftError.NONE, 120, 6, 118), fetch)
    assert isinstance(response, FetchResponse)
    assert (response.fetch_offset, response.last_fetched_epoch) == (121, 6)


# --- entries as record batches ----------------------------------------------------------------


def test_entries_become_one_batch_per_run_of_epoch_and_control() -> None:
    entries = (
        Entry(10, 1, b"a"),
        Entry(11, 1, b"b"),
        Entry(12, 2, b"lc", True),
        Entry(13, 2, b"c"),
        Entry(14, 2, b"d"),
        Entry(15, 3, b"lc3", True),
        Entry(16, 3, b"lc3b", True),
        Entry(17, 3, b"e"),
    )
    data = wire.entries_to_records(entries)
    headers = list(record_batch.iter_batches(data))
    assert [(h.base_offset, h.record_count, h.partition_leader_epoch, h.is_control) for h in headers] == [
        (10, 2, 1, False),
        (12, 1, 2, True),
        (13, 2, 2, False),
        (15, 2, 3, True),
        (17, 1, 3, False),
    ]
    for h in headers:
        record_batch.validate_batch(data, h)  # CRC, magic, counts
        for record in record_batch.decode_records(data, h):
            assert record.key is None
            assert record.value == entries[record.offset - 10].data
    assert wire.records_to_entries(data) == entries
    assert wire.records_to_entries(memoryview(data)) == entries


def test_no_entries_no_records() -> None:
    assert wire.entries_to_records(()) == b""
    assert wire.records_to_entries(b"") == ()
    assert wire.records_to_entries(None) == ()


def test_entries_to_send_must_be_consecutive() -> None:
    with pytest.raises(ValueError, match="not consecutive"):
        wire.entries_to_records((Entry(1, 1, b"a"), Entry(3, 1, b"b")))


def test_corrupt_batch_is_rejected() -> None:
    data = bytearray(wire.entries_to_records(MIXED))
    second = list(record_batch.iter_batches(data))[1]
    data[second.end - 1] ^= 0xFF  # inside the CRC-covered records of the second batch
    with pytest.raises(wire.WireError, match="CRC"):
        wire.records_to_entries(bytes(data))


def test_truncated_batch_is_rejected() -> None:
    data = wire.entries_to_records(MIXED)
    with pytest.raises(wire.WireError):
        wire.records_to_entries(data[:-3])


def test_batches_with_an_offset_gap_are_rejected() -> None:
    first = record_batch.build_batch([record_batch.NewRecord(b"a")], base_offset=10, partition_leader_epoch=1)
    after_gap = record_batch.build_batch([record_batch.NewRecord(b"b")], base_offset=12, partition_leader_epoch=1)
    assert wire.records_to_entries(first) == (Entry(10, 1, b"a"),)
    with pytest.raises(wire.WireError, match="does not follow"):
        wire.records_to_entries(first + after_gap)


def _record(offset_delta: int, value: bytes) -> bytes:
    body = bytearray(b"\x00")  # attributes
    record_batch.write_varint(body, 0)  # timestamp delta
    record_batch.write_varint(body, offset_delta)
    record_batch.write_varint(body, -1)  # key: null
    record_batch.write_varint(body, len(value))
    body += value
    record_batch.write_varint(body, 0)  # headers
    framed = bytearray()
    record_batch.write_varint(framed, len(body))
    return bytes(framed + body)


def test_a_batch_with_an_offset_gap_inside_is_rejected() -> None:
    # Two records with offset deltas 0 and 2: count and last offset delta agree (2 records, delta
    # 1), so the batch itself validates; its record offsets are not consecutive.
    batch = record_batch.assemble_batch(
        base_offset=10, partition_leader_epoch=1, attributes=0, last_offset_delta=1, base_timestamp=-1,
        max_timestamp=-1, producer_id=-1, producer_epoch=-1, base_sequence=-1, record_count=2,
        records=_record(0, b"a") + _record(2, b"b"),
    )
    with pytest.raises(wire.WireError, match="offset 12 where 11 was expected"):
        wire.records_to_entries(batch)


def test_fetched_entries_must_continue_the_fetch() -> None:
    ok = FetchResponse(1, 3, 7, 1, RaftError.NONE, 120, 6, 118, MIXED)
    shifted = FetchRequest(3, 1, 7, 119, 6, 500)
    with pytest.raises(wire.WireError, match="start at 120"):
        _response_through_wire(ok, shifted)
    # Epochs below the fetcher's last fetched epoch, or above the answering leader's, cannot follow.
    later = FetchRequest(3, 1, 7, 120, 7, 500)
    with pytest.raises(wire.WireError, match="epoch 6 after epoch 7"):
        _response_through_wire(ok, later)
    stale_leader = FetchResponse(1, 3, 6, 1, RaftError.NONE, 120, 6, 118, MIXED)
    with pytest.raises(wire.WireError, match="leader of epoch 6"):
        _response_through_wire(stale_leader, FETCH)


# --- refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize("msg", REQUESTS, ids=lambda m: type(m).__name__)
def test_wrong_cluster_id_gives_inconsistent_cluster_id(msg: Message) -> None:
    api_key, version, data = _request_bytes(msg, cluster_id="another-cluster")
    refused = _receive_request(api_key, version, data, local_id=msg.dst)
    assert refused is ErrorCode.INCONSISTENT_CLUSTER_ID and refused == 104
    # The answer, at every version of the response: the sender sees Kafka's error code.
    for v in range(MESSAGES[api_key][1].valid[0], MESSAGES[api_key][1].valid[1] + 1):
        body = _error_response_body(api_key, v, refused)
        with pytest.raises(wire.RemoteError, match="INCONSISTENT_CLUSTER_ID") as info:
            wire.decode_response(api_key, body, msg)
        assert info.value.code == 104


@pytest.mark.parametrize("msg", REQUESTS, ids=lambda m: type(m).__name__)
def test_a_request_without_cluster_id_is_accepted(msg: Message) -> None:
    # As in Kafka's KRaft: the cluster id is checked when present.
    api_key, version, body = wire.encode_request(msg, CLUSTER)
    data = MESSAGES[api_key][0].encode({**body, "cluster_id": None}, version)
    assert _receive_request(api_key, version, data, local_id=msg.dst) == msg


@pytest.mark.parametrize("msg", [VOTE, BEGIN], ids=lambda m: type(m).__name__)
def test_a_request_for_another_voter_is_refused(msg: Message) -> None:
    api_key, version, data = _request_bytes(msg)
    assert _receive_request(api_key, version, data, local_id=msg.dst + 1) is ErrorCode.INVALID_VOTER_KEY


def _mutated(msg: Message, change: Any) -> tuple[ApiKey, int, bytes]:
    api_key, version, body = wire.encode_request(msg, CLUSTER)
    change(body)
    return api_key, version, MESSAGES[api_key][0].encode(body, version)


def _partition(body: dict[str, Any]) -> dict[str, Any]:
    partition: dict[str, Any] = body["topics"][0]["partitions"][0]
    return partition


@pytest.mark.parametrize(
    ("msg", "change"),
    [
        (VOTE, lambda b: b["topics"][0].update(topic_name="other")),
        (VOTE, lambda b: _partition(b).update(partition_index=1)),
        (VOTE, lambda b: b["topics"][0]["partitions"].append(dict(_partition(b)))),
        (VOTE, lambda b: b.update(topics=[])),
        (VOTE, lambda b: _partition(b).update(last_offset_epoch=-1)),
        (BEGIN, lambda b: _partition(b).update(leader_id=-1)),
        (END, lambda b: b["topics"].append(dict(b["topics"][0]))),
        (FETCH, lambda b: b["topics"][0].update(topic_id=wire.METADATA_TOPIC_ID.__class__(int=2))),
        (FETCH, lambda b: b.update(replica_state={"replica_id": -1, "replica_epoch": -1})),
        (FETCH, lambda b: _partition(b).update(fetch_offset=-1)),
        (FETCH_SNAPSHOT, lambda b: b["topics"][0].update(name="other")),
        (FETCH_SNAPSHOT, lambda b: _partition(b).update(snapshot_id={"end_offset": -1, "epoch": 5})),
    ],
)
def test_malformed_requests_get_invalid_request(msg: Message, change: Any) -> None:
    api_key, version, data = _mutated(msg, change)
    assert _receive_request(api_key, version, data, local_id=msg.dst) is ErrorCode.INVALID_REQUEST


def test_a_fetch_without_last_fetched_epoch_is_refused() -> None:
    # Before version 12 a fetch cannot say which epoch its log ends in; Kafka refuses it too.
    _, _, body = wire.encode_request(FETCH, CLUSTER)
    data = MESSAGES[ApiKey.FETCH][0].encode(body, 11)
    assert _receive_request(ApiKey.FETCH, 11, data, local_id=1) is ErrorCode.INVALID_REQUEST


def test_error_response_of_an_old_fetch_names_the_partition() -> None:
    # Fetch has no top-level error code before version 7.
    body = _error_response_body(ApiKey.FETCH, 6, ErrorCode.INVALID_REQUEST)
    assert body["responses"][0]["partitions"][0]["error_code"] == ErrorCode.INVALID_REQUEST
    with pytest.raises(wire.RemoteError) as info:
        wire.decode_response(ApiKey.FETCH, body, FETCH)
    assert info.value.code == ErrorCode.INVALID_REQUEST
    # A code the core knows, but with no leader and epoch to go with it, is no message for it.
    body = _error_response_body(ApiKey.FETCH, 6, ErrorCode.INCONSISTENT_VOTER_SET)
    with pytest.raises(wire.WireError, match="no current leader"):
        wire.decode_response(ApiKey.FETCH, body, FETCH)


def test_an_error_code_unknown_to_the_core_is_a_remote_error() -> None:
    body = wire.encode_response(VoteResponse(2, 1, 5, False), ApiKey.VOTE, 2)
    body["topics"][0]["partitions"][0]["error_code"] = ErrorCode.INVALID_VOTER_KEY
    with pytest.raises(wire.RemoteError, match="INVALID_VOTER_KEY"):
        wire.decode_response(ApiKey.VOTE, body, VOTE)


def test_malformed_responses_are_wire_errors() -> None:
    body = wire.encode_response(BeginQuorumEpochResponse(2, 1, 7, 1), ApiKey.BEGIN_QUORUM_EPOCH, 1)
    body["topics"][0]["topic_name"] = "other"
    with pytest.raises(wire.WireError, match="another partition"):
        wire.decode_response(ApiKey.BEGIN_QUORUM_EPOCH, body, BEGIN)
    fetch = wire.encode_response(FetchResponse(1, 3, 7, 1, RaftError.NONE, 120, 6), ApiKey.FETCH, 18)
    fetch["responses"][0]["partitions"][0]["current_leader"] = None
    with pytest.raises(wire.WireError, match="no current leader"):
        wire.decode_response(ApiKey.FETCH, fetch, FETCH)
    fetch = wire.encode_response(FetchResponse(1, 3, 7, 1, RaftError.NONE, 120, 6), ApiKey.FETCH, 18)
    fetch["responses"][0]["partitions"][0]["diverging_epoch"] = {"epoch": -1, "end_offset": 5}
    with pytest.raises(wire.WireError, match="diverging epoch"):
        wire.decode_response(ApiKey.FETCH, fetch, FETCH)


def test_entry_points_refuse_mismatched_types() -> None:
    with pytest.raises(TypeError):
        wire.encode_request(VoteResponse(2, 1, 5, True), CLUSTER)
    with pytest.raises(TypeError):
        wire.encode_response(VoteResponse(2, 1, 5, True), ApiKey.FETCH, 18)
    with pytest.raises(TypeError):
        wire.decode_response(ApiKey.VOTE, {}, BEGIN)
    with pytest.raises(ValueError):
        wire.decode_request(ApiKey.METADATA, 12, {}, local_id=1, cluster_id=CLUSTER)
